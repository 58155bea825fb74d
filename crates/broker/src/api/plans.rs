//! Scaling plans through the API (rules A1–A7): create, replace, change,
//! read, list and delete plans, and each pool's status under its plan.
//! The checks are the engine's `ScalingPlan::validate` (400 naming the
//! field) and the broker's (a pool served by two plans is 409, a personal
//! pool 400).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use api::ErrorBody;
use api::types::List;
use placement::autoscale::{Action, Figures, ResolvedPhase, ScalingPlan};

use super::Json;
use super::error::ApiError;
use crate::autoscale::Autoscale;

/// A plan as shown: its name and its body.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalingPlanOutput {
    pub name: String,
    #[serde(flatten)]
    pub plan: ScalingPlan,
}

/// One pool under its plan now (A3–A7): the phase in force, the figures
/// (used capacity, threshold, running / available / minimum hosts), what
/// the plan waits for, and the actions its next evaluation would take.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolScalingStatus {
    pub host_pool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<ResolvedPhase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figures: Option<Figures>,
    /// The figures' `waitingFor`, as sentences.
    pub waiting_for: Vec<String>,
    pub next_actions: Vec<Action>,
    /// Why the pool could not be evaluated (it was deleted, say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `GET …/scalingPlans/{plan}/status`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalingPlanStatus {
    pub name: String,
    pub host_pools: Vec<PoolScalingStatus>,
}

fn output(name: String, plan: ScalingPlan) -> ScalingPlanOutput {
    ScalingPlanOutput { name, plan }
}

/// Every scaling plan, by name.
#[utoipa::path(get, path = "/api/v1/scalingPlans", tag = "scalingPlans",
    responses((status = 200, body = List<ScalingPlanOutput>)))]
pub async fn list(
    State(plans): State<Arc<Autoscale>>,
) -> Result<axum::Json<List<ScalingPlanOutput>>, ApiError> {
    let value = plans.all().into_iter().map(|(n, p)| output(n, p)).collect();
    Ok(axum::Json(List { value }))
}

/// One scaling plan.
#[utoipa::path(get, path = "/api/v1/scalingPlans/{plan}", tag = "scalingPlans",
    responses((status = 200, body = ScalingPlanOutput), (status = 404, body = ErrorBody)))]
pub async fn show(
    State(plans): State<Arc<Autoscale>>,
    Path(name): Path<String>,
) -> Result<axum::Json<ScalingPlanOutput>, ApiError> {
    let plan = plans.plan(&name)?;
    Ok(axum::Json(output(name, plan)))
}

/// Create (201) or replace (200) a plan. 400 naming the field at fault (a
/// personal pool, a pool that does not exist, a bad phase); 409 when one of
/// its pools is served by another plan.
#[utoipa::path(put, path = "/api/v1/scalingPlans/{plan}", tag = "scalingPlans",
    request_body = ScalingPlan,
    responses((status = 201, body = ScalingPlanOutput), (status = 200, body = ScalingPlanOutput),
              (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn put(
    State(plans): State<Arc<Autoscale>>,
    Path(name): Path<String>,
    Json(plan): Json<ScalingPlan>,
) -> Result<(StatusCode, axum::Json<ScalingPlanOutput>), ApiError> {
    let created = plans.put(&name, plan.clone()).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(output(name, plan))))
}

/// Change only the fields given (a JSON merge patch of the plan; a list,
/// such as `schedules` or `hostPools`, is replaced whole).
#[utoipa::path(patch, path = "/api/v1/scalingPlans/{plan}", tag = "scalingPlans",
    request_body = Object,
    responses((status = 200, body = ScalingPlanOutput), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn patch(
    State(plans): State<Arc<Autoscale>>,
    Path(name): Path<String>,
    Json(input): Json<serde_json::Value>,
) -> Result<axum::Json<ScalingPlanOutput>, ApiError> {
    let current = plans.plan(&name)?;
    let serde_json::Value::Object(changes) = input else {
        return Err(ApiError::invalid("the body must be a JSON object"));
    };
    let mut merged = serde_json::to_value(&current)
        .map_err(|e| ApiError::invalid(format!("cannot read the plan: {e}")))?;
    if let serde_json::Value::Object(m) = &mut merged {
        for (k, v) in changes {
            if v.is_null() {
                m.remove(&k);
            } else {
                m.insert(k, v);
            }
        }
    }
    let plan: ScalingPlan =
        serde_json::from_value(merged).map_err(|e| ApiError::invalid(e.to_string()))?;
    plans.put(&name, plan.clone()).await?;
    Ok(axum::Json(output(name, plan)))
}

/// Remove a plan; its pools use their own algorithm again.
#[utoipa::path(delete, path = "/api/v1/scalingPlans/{plan}", tag = "scalingPlans",
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn delete(
    State(plans): State<Arc<Autoscale>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    plans.delete(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Each pool of the plan now: phase, figures, what the plan waits for.
#[utoipa::path(get, path = "/api/v1/scalingPlans/{plan}/status", tag = "scalingPlans",
    responses((status = 200, body = ScalingPlanStatus), (status = 404, body = ErrorBody)))]
pub async fn status(
    State(plans): State<Arc<Autoscale>>,
    Path(name): Path<String>,
) -> Result<axum::Json<ScalingPlanStatus>, ApiError> {
    let pools = plans.status(&name)?;
    let host_pools = pools
        .into_iter()
        .map(|s| match s.evaluation {
            Ok(e) => PoolScalingStatus {
                host_pool: s.pool,
                phase: s.phase,
                waiting_for: e
                    .figures
                    .waiting_for
                    .iter()
                    .map(|w| w.to_string())
                    .collect(),
                figures: Some(e.figures),
                next_actions: e.actions,
                error: None,
            },
            Err(error) => PoolScalingStatus {
                host_pool: s.pool,
                phase: s.phase,
                figures: None,
                waiting_for: Vec::new(),
                next_actions: Vec::new(),
                error: Some(error),
            },
        })
        .collect();
    Ok(axum::Json(ScalingPlanStatus { name, host_pools }))
}
