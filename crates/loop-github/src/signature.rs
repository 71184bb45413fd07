//! Verification of webhook signatures (`X-Hub-Signature-256`).
//!
//! GitHub signs each delivery's raw body with HMAC-SHA256 under the webhook secret and
//! sends `sha256=<hex digest>`. The receiver calls [`verify_signature`] before it trusts a
//! single byte of the body. The comparison is constant-time (`hmac`'s `verify_slice`).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The name of the header GitHub puts the signature in.
pub const SIGNATURE_HEADER: &str = "X-Hub-Signature-256";

/// Why a delivery's signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the delivery carries no `X-Hub-Signature-256` header")]
    Missing,
    #[error("`X-Hub-Signature-256` is not `sha256=` followed by 64 hex digits")]
    Malformed,
    #[error("`X-Hub-Signature-256` does not match the body")]
    Mismatch,
}

impl loop_core::Hint for SignatureError {
    fn hint(&self) -> Option<String> {
        matches!(self, Self::Mismatch).then(|| {
            "check that the webhook secret configured on GitHub is the one in `webhooks.ghWebhook.secretEnv`"
                .to_owned()
        })
    }
}

/// Checks `header` (the value of `X-Hub-Signature-256`) against `body` signed with `secret`.
pub fn verify_signature(
    secret: &[u8],
    body: &[u8],
    header: Option<&str>,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let hex = header.trim().strip_prefix("sha256=").ok_or(SignatureError::Malformed)?;
    let expected = decode_hex(hex).ok_or(SignatureError::Malformed)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).map_err(|_| SignatureError::Mismatch)?; // HMAC accepts keys of any length
    mac.update(body);
    mac.verify_slice(&expected).map_err(|_| SignatureError::Mismatch)
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if hex.len() != 64 {
        return None;
    }
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    hex.as_bytes().chunks(2).map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // The example from GitHub's "Validating webhook deliveries" documentation.
    const SECRET: &[u8] = b"It's a Secret to Everybody";
    const BODY: &[u8] = b"Hello, World!";
    const SIGNATURE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    #[test]
    fn githubs_documented_example_verifies() {
        assert_eq!(verify_signature(SECRET, BODY, Some(SIGNATURE)), Ok(()));
    }

    #[test]
    fn wrong_body_secret_or_shape_is_refused() {
        assert_eq!(
            verify_signature(SECRET, b"Hello", Some(SIGNATURE)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(b"other", BODY, Some(SIGNATURE)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(verify_signature(SECRET, BODY, None), Err(SignatureError::Missing));
        for bad in ["757107ea", "sha1=757107ea", "sha256=zz", "sha256=757107ea0eb2509f"] {
            assert_eq!(
                verify_signature(SECRET, BODY, Some(bad)),
                Err(SignatureError::Malformed),
                "{bad}"
            );
        }
        let upper = SIGNATURE.to_uppercase().replace("SHA256=", "sha256=");
        assert_eq!(verify_signature(SECRET, BODY, Some(&upper)), Ok(()));
    }

    proptest::proptest! {
        #[test]
        fn any_header_is_refused_or_accepted_without_panicking(header in ".{0,80}", body in proptest::collection::vec(0u8.., 0..64)) {
            let _ = verify_signature(SECRET, &body, Some(&header));
        }
    }
}
