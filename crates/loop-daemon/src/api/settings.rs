//! The config, read-only: `GET /api/v1/config` (`{path, exists, version, config}` — the
//! config in force, defaults filled in, as `config show --json` prints it) and `GET
//! /api/v1/config/schema` (a JSON Schema of the same document: every key with its JSON
//! type and its default, unknown keys refused — the shape a settings editor renders).
//! Writing the config stays the CLI's and the file's.

use axum::Json;
use axum::extract::State;
use loop_core::config::Config;
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
    let mut schema = schema_of(&Config::default().to_json());
    if let Value::Object(map) = &mut schema {
        map.insert("$schema".to_owned(), json!("https://json-schema.org/draft/2020-12/schema"));
        map.insert("title".to_owned(), json!("the-loop cli-config.yaml"));
    }
    Json(schema)
}

/// The schema of a document shaped like `value`, `value` as every default.
fn schema_of(value: &Value) -> Value {
    match value {
        Value::Object(fields) => {
            let properties: Map<String, Value> =
                fields.iter().map(|(key, value)| (key.clone(), schema_of(value))).collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_has_every_key_with_its_default() {
        let schema = schema_of(&Config::default().to_json());
        let port = &schema["properties"]["service"]["properties"]["port"];
        assert_eq!(port["type"], "integer");
        assert_eq!(port["default"], 4114);
        let label = &schema["properties"]["routing"]["properties"]["autoExecuteLabel"];
        assert_eq!(label["default"], "the-loop: auto-execute");
        assert_eq!(schema["properties"]["routing"]["additionalProperties"], false);
    }
}
