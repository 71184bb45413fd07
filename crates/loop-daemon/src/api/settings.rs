//! The config, read-only: `GET /api/v1/config` (`{path, exists, version, config}` — the
//! config in force, defaults filled in, as `config show --json` prints it) and `GET
//! /api/v1/config/schema` (a JSON Schema of the same document: every key with its JSON
//! type and its default, unknown keys refused — the shape a settings editor renders).
//! Writing the config stays the CLI's and the file's.

use axum::Json;
use axum::extract::State;
use loop_core::config::{Config, NAMED_MAPPINGS};
use serde_json::{Map, Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::ApiState;

pub(super) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new().routes(routes!(config)).routes(routes!(schema))
}

/// The config in force, defaults filled in.
#[utoipa::path(get, path = "/api/v1/config", tag = "config", responses(
    (status = 200, description = "`{path, exists, version, config}`", body = Value)))]
async fn config(State(state): State<ApiState>) -> Json<Value> {
    let current = state.config.current();
    let path = state.config.path().to_owned();
    let exists = tokio::task::spawn_blocking({
        let path = path.clone();
        move || path.is_file()
    })
    .await
    .unwrap_or(false);
    Json(json!({
        "path": path,
        "exists": exists,
        "version": current.version,
        "config": current.to_json(),
    }))
}

/// A JSON Schema of the config: every key, its JSON type and default.
#[utoipa::path(get, path = "/api/v1/config/schema", tag = "config", responses(
    (status = 200, description = "The schema", body = Value)))]
async fn schema() -> Json<Value> {
    let mut schema = schema_of("", &Config::default().to_json());
    if let Value::Object(map) = &mut schema {
        map.insert("$schema".to_owned(), json!("https://json-schema.org/draft/2020-12/schema"));
        map.insert("title".to_owned(), json!("the-loop cli-config.yaml"));
    }
    Json(schema)
}

/// The schema of a document shaped like `value` at the key `path`, `value` as every
/// default. A mapping keyed by the operator's names ([`NAMED_MAPPINGS`]) takes any name,
/// each value shaped like the shipped ones (or `null`, which removes a shipped one).
fn schema_of(path: &str, value: &Value) -> Value {
    match value {
        Value::Object(fields) if NAMED_MAPPINGS.contains(&path) => {
            let entry_path = format!("{path}.*");
            let shape = fields.values().next().map(|v| without_defaults(schema_of(&entry_path, v)));
            let entry = json!({"anyOf": [shape.unwrap_or_else(|| json!({})), {"type": "null"}]});
            json!({"type": "object", "default": value, "additionalProperties": entry})
        }
        Value::Object(fields) => {
            let properties: Map<String, Value> = fields
                .iter()
                .map(|(key, value)| {
                    let at = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                    (key.clone(), schema_of(&at, value))
                })
                .collect();
            json!({"type": "object", "properties": properties, "additionalProperties": false})
        }
        Value::Array(_) => json!({"type": "array", "default": value}),
        Value::String(_) => json!({"type": "string", "default": value}),
        Value::Bool(_) => json!({"type": "boolean", "default": value}),
        Value::Number(n) if n.is_f64() => json!({"type": "number", "default": value}),
        Value::Number(_) => json!({"type": "integer", "default": value}),
        // Unset by default: any value of the key's own kind.
        Value::Null => json!({"default": null}),
    }
}

/// `schema` without its `default`s (the shape of an entry the operator names).
fn without_defaults(mut schema: Value) -> Value {
    if let Value::Object(map) = &mut schema {
        map.remove("default");
        if let Some(Value::Object(properties)) = map.get_mut("properties") {
            for property in properties.values_mut() {
                *property = without_defaults(property.take());
            }
        }
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_of_the_operators_names_takes_any_name_shaped_like_a_price() {
        let schema = schema_of("", &Config::default().to_json());
        let models = &schema["properties"]["pricing"]["properties"]["models"];
        assert_eq!(models["type"], "object");
        assert!(models["default"]["claude-opus-4"]["inputPerMTok"].is_number(), "{models:#}");
        let entry = &models["additionalProperties"]["anyOf"][0];
        assert_eq!(entry["properties"]["cacheReadPerMTok"], json!({"type": "number"}));
        assert_eq!(entry["additionalProperties"], false);
    }

    #[test]
    fn the_schema_has_every_key_with_its_default() {
        let schema = schema_of("", &Config::default().to_json());
        let port = &schema["properties"]["service"]["properties"]["port"];
        assert_eq!(port["type"], "integer");
        assert_eq!(port["default"], 4114);
        let label = &schema["properties"]["routing"]["properties"]["autoExecuteLabel"];
        assert_eq!(label["default"], "the-loop: auto-execute");
        assert_eq!(schema["properties"]["routing"]["additionalProperties"], false);
    }
}
