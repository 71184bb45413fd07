//! What happened: `GET /api/v1/events` (the last `limit` matching lines, oldest first;
//! filters `type` (repeatable, `*` globs), `workItem`, `deliveryId`, `source`, `level`
//! (the quietest shown), `since` (RFC 3339 or an age such as `15m`), `limit` (default
//! 50, 0: all)), `GET /api/v1/events/types` (every line type this version writes, and
//! whether it records an effect or is the routine trail), `GET /api/v1/explain?subject=`
//! (a delivery's trail, or a work item's records and trails — `explain --json`'s
//! answer) and `GET /api/v1/daemons` (each ingress's liveness from its lock).

use axum::Json;
use axum::extract::State;
use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::explain::{self, Record};
use loop_core::log::{Kind, Level, Weight};
use loop_store::StoreError;
use loop_store::event_log::filter::{EventFilter, parse_since};
use loop_store::event_log::read::read_all;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::Detail;
use super::{ApiError, ApiState, Params, read, work_item};
use crate::service::{Ingress, liveness};

pub(super) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(events))
        .routes(routes!(types))
        .routes(routes!(explain))
        .routes(routes!(daemons))
}

/// How many lines `GET /api/v1/events` returns without a `limit`.
const DEFAULT_LIMIT: usize = 50;

/// The event filter and limit a query string names (repeatable `type`).
fn event_query(pairs: Vec<(String, String)>) -> Result<(EventFilter, usize), ApiError> {
    let mut filter = EventFilter::default();
    let mut limit = DEFAULT_LIMIT;
    for (key, value) in pairs {
        match key.as_str() {
            "type" => filter.events.push(value),
            "workItem" => filter.work_item = Some(work_item(&value)?),
            "deliveryId" => filter.delivery_id = Some(value),
            "source" => filter.source = Some(value),
            "level" => {
                filter.level = Some(Level::from_name(&value).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "`level`: expected one of debug, info, warning, error, got {value:?}"
                    ))
                })?);
            }
            "since" => {
                let since = parse_since(&value, Timestamp::now())
                    .map_err(|err| ApiError::bad_request(format!("`since`: {err}")))?;
                filter.since = Some(since);
            }
            "limit" => limit = count("limit", &value)?,
            _ => return Err(ApiError::bad_request(format!("unknown query parameter `{key}`"))),
        }
    }
    Ok((filter, limit))
}

/// The last `limit` matching event-log lines, oldest first.
#[utoipa::path(get, path = "/api/v1/events", tag = "events",
    params(
        ("type" = Option<Vec<String>>, Query, explode = true, description = "Line types (repeatable, `*` globs, OR-ed)"),
        ("workItem" = Option<super::openapi::WorkItemRef>, Query, description = "A work item's ref: its lines"),
        ("deliveryId" = Option<String>, Query, description = "A delivery's lines"),
        ("source" = Option<String>, Query, description = "The emitting process"),
        ("level" = Option<String>, Query, pattern = "^(debug|info|warning|error)$", description = "The quietest level shown"),
        ("since" = Option<super::openapi::Since>, Query),
        ("limit" = Option<u32>, Query, description = "How many (default 50; 0: all)"),
    ),
    responses(
        (status = 200, description = "The lines, as written", body = Vec<Value>),
        (status = 400, description = "An unknown parameter or a bad value", body = Detail),
        (status = 500, description = "The state could not be read", body = Detail)))]
async fn events(
    State(state): State<ApiState>,
    Params(pairs): Params<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let (filter, limit) = event_query(pairs)?;
    let records = log_lines(&state).await?;
    let mut matching: Vec<Value> = records
        .into_iter()
        .filter(|record| filter.matches(record))
        .map(|record| Value::Object(record.0))
        .collect();
    if limit > 0 && matching.len() > limit {
        matching.drain(..matching.len() - limit);
    }
    Ok(Json(Value::Array(matching)))
}

/// Every line of the event log (rotated files first), off the runtime's threads.
async fn log_lines(
    state: &ApiState,
) -> Result<Vec<loop_store::event_log::read::EventRecord>, ApiError> {
    let path = state.events.path().map(ToOwned::to_owned);
    read(move || match path {
        Some(path) => read_all(&path),
        None => Ok::<_, StoreError>(Vec::new()),
    })
    .await
}

/// Every line type this version writes, and what it records.
#[utoipa::path(get, path = "/api/v1/events/types", tag = "events", responses(
    (status = 200, description = "`{<type>: <what it records>}`", body = std::collections::BTreeMap<String, String>)))]
async fn types() -> Json<Value> {
    let catalog: Map<String, Value> = Kind::ALL
        .iter()
        .map(|kind| {
            let weight = match kind.weight() {
                Weight::Effect => "records an effect on a work item",
                Weight::Trail => "part of the routine trail",
            };
            (kind.name().to_owned(), Value::from(weight))
        })
        .collect();
    Json(Value::Object(catalog))
}

/// A count parameter: 0 to [`i32::MAX`] (the document's `int32`), else a 400.
fn count(name: &str, value: &str) -> Result<usize, ApiError> {
    value.parse::<u32>().ok().filter(|n| i32::try_from(*n).is_ok()).map(|n| n as usize).ok_or_else(
        || {
            ApiError::bad_request(format!(
                "`{name}`: expected a count from 0 to {}, got {value:?}",
                i32::MAX
            ))
        },
    )
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ExplainQuery {
    #[param(value_type = super::openapi::Subject)]
    subject: String,
    /// How many deliveries of a work item to show (newest); 0: all.
    #[serde(default)]
    #[param(value_type = Option<u32>)]
    limit: Option<String>,
}

/// A delivery's trail, or a work item's records and trails (`explain --json`).
#[utoipa::path(get, path = "/api/v1/explain", tag = "events", params(ExplainQuery), responses(
    (status = 200, description = "`{delivery, steps, verdict}` or `{workItem, state, summary, deliveries}`", body = Value),
    (status = 400, description = "A malformed ref", body = Detail),
    (status = 404, description = "Nothing is known about it", body = Detail),
    (status = 500, description = "The state could not be read", body = Detail)))]
async fn explain(
    State(state): State<ApiState>,
    Params(query): Params<ExplainQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = query.limit.as_deref().map(|v| count("limit", v)).transpose()?.unwrap_or(0);
    let records: Vec<Record> = log_lines(&state).await?.into_iter().map(|r| r.0).collect();
    let subject = query.subject.trim();
    let looks_like_ref = subject.contains('#') && subject.contains(':');
    if looks_like_ref {
        let item: WorkItemRef = work_item(subject)?;
        let store = state.store.clone();
        let found = read({
            let item = item.clone();
            move || store.item_state(&item)
        })
        .await?;
        let trails = explain::item_trail(&records, &item, limit);
        if trails.is_empty() && !found.known() {
            return Err(ApiError::not_found(format!("nothing is known about {item}")));
        }
        return Ok(Json(explain::item_explanation(&item, &found, &trails)));
    }
    let trail = explain::delivery_trail(&records, subject);
    if trail.steps.is_empty() {
        return Err(ApiError::not_found(format!(
            "the event log has no line about delivery `{subject}`"
        )));
    }
    serde_json::to_value(&trail)
        .map(Json)
        .map_err(|err| ApiError::internal(format!("cannot encode the trail: {err}")))
}

/// Each ingress's liveness, from its lock.
#[utoipa::path(get, path = "/api/v1/daemons", tag = "daemons", responses(
    (status = 200, description = "`[{daemon, running, pid, pidfile, logfile, startedAt, lastCycleAt}]`", body = Vec<Value>),
    (status = 500, description = "The state could not be read", body = Detail)))]
async fn daemons(State(state): State<ApiState>) -> Result<Json<Value>, ApiError> {
    let store = state.store.clone();
    let rows = read(move || {
        let layout = store.layout();
        let heartbeat = store.read_heartbeat()?;
        let logfile = layout.daemon_output("service");
        let mut rows = Vec::new();
        for ingress in Ingress::ALL {
            let live = liveness(ingress, layout)?;
            let beat = heartbeat.as_ref().filter(|_| ingress == Ingress::Poller);
            rows.push(json!({
                "daemon": ingress.name(),
                "running": live.running(),
                "pid": live.pid(),
                "pidfile": live.pidfile,
                "logfile": logfile,
                "startedAt": beat.map(|b| b.started_at),
                "lastCycleAt": beat.and_then(|b| b.last_cycle_at),
            }));
        }
        Ok::<_, StoreError>(rows)
    })
    .await?;
    Ok(Json(Value::Array(rows)))
}
