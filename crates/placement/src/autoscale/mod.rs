//! Autoscale's decisions (rules A1–A8), pure like the rest of the engine:
//! the scaling plan and its validation (`plan`), the phase in force at an
//! instant (`phase`), the pool as a plan sees it (`view`), one evaluation
//! of a plan over a pool (`evaluate`) and start on connect (`connect`).
//!
//! **Nothing here performs IO or reads a clock**: the broker and the
//! simulator pass the time in, carry out the actions (power commands,
//! drains, messages, logoffs) and keep the records, so both run the very
//! same decisions.

mod connect;
mod evaluate;
mod phase;
mod plan;
mod view;

pub use connect::{StartOnConnect, start_on_connect};
pub use evaluate::{
    Action, ActionKind, Evaluation, Figures, HostMemory, PlanMemory, Reason, Waiting, evaluate,
};
pub use phase::{Phase, ResolvedPhase, phase_in_force};
pub use plan::{
    DEFAULT_WAIT_TIME_MINUTES, DayOfWeek, MAX_NOTIFICATION_MESSAGE_BYTES, MAX_PLAN_HOST_POOLS,
    MAX_SCHEDULES, MAX_TAG_BYTES, MAX_WAIT_TIME_MINUTES, ScalingPlan, Schedule, StopHostsWhen,
    validate_tag,
};
pub use view::{ScalingHost, ScalingView};
