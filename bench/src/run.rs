//! One table size on one system: the order of the measurements, and what
//! happens when a step fails (the error is recorded in the report and the
//! benchmark moves on, so one broken system still leaves the other's
//! numbers).

use std::path::Path;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::db;
use crate::error::Result;
use crate::freshet::FreshetServer;
use crate::phases::{
    self, Freshness, LoadTimes, Target, Throughput, ViewKind, WriteLatency, wait_visible,
};
use crate::postgres::PgServer;
use crate::workload::{Dataset, Model};

/// The knobs shared by every size.
#[derive(Clone, Debug)]
pub struct Settings {
    pub changes: usize,
    pub batch: usize,
    pub batches: usize,
    pub timeout: Duration,
    pub view: ViewKind,
    pub seed: u64,
}

/// Everything measured on one system at one size; a field stays empty when
/// the system cannot do it or a step before it failed.
#[derive(Debug, Default)]
pub struct SystemRun {
    pub load: Option<LoadTimes>,
    pub writes: Vec<WriteLatency>,
    pub adhoc_query: Option<Duration>,
    pub view_create: Option<Duration>,
    pub refresh: Option<Duration>,
    pub freshness: Vec<Freshness>,
    pub throughput: Vec<Throughput>,
    /// Why something was not measured.
    pub notes: Vec<String>,
}

/// Both systems at one size.
#[derive(Debug)]
pub struct SizeRun {
    pub size: usize,
    pub freshet: SystemRun,
    pub postgres: Option<SystemRun>,
}

/// Seeded per size and phase, so both systems get the same writes and a
/// rerun repeats them.
fn phase_rng(settings: &Settings, size: usize, phase: u64) -> StdRng {
    let seed = settings.seed ^ (size as u64).rotate_left(20) ^ phase;
    StdRng::seed_from_u64(seed)
}

/// Start a fresh Freshet, measure everything it supports, stop it.
pub async fn freshet(
    bin: &Path,
    workers: Option<u32>,
    data: &Dataset,
    size: usize,
    settings: &Settings,
) -> SystemRun {
    let mut run = SystemRun::default();
    eprintln!("[{size} orders] Freshet: starting {}", bin.display());
    let server = match FreshetServer::start(bin, workers).await {
        Ok(server) => server,
        Err(e) => {
            run.notes.push(format!("Freshet did not start: {e}"));
            return run;
        }
    };
    if let Err(e) = freshet_steps(&mut run, &server, data, size, settings).await {
        let log = server.log_tail();
        let log = if log.trim().is_empty() {
            String::new()
        } else {
            format!("\n\nFreshet log tail:\n```\n{log}\n```")
        };
        eprintln!("[{size} orders] Freshet: stopped: {e}");
        run.notes.push(format!("Freshet stopped: {e}{log}"));
    }
    run
}

async fn freshet_steps(
    run: &mut SystemRun,
    server: &FreshetServer,
    data: &Dataset,
    size: usize,
    settings: &Settings,
) -> Result<()> {
    let t = Target {
        system: "Freshet",
        writer: server.connect().await?,
        reader: server.connect().await?,
    };
    let mut model = data.model.clone();
    load_step(run, &t, data, size).await?;
    baseline_steps(run, &t, size, settings, &mut model).await?;
    eprintln!("[{size} orders] Freshet: creating region_stats");
    let created = phases::create_view(&t, settings.view).await;
    run.view_create = match created {
        Ok(d) => Some(d),
        Err(e) => {
            let msg = format!(
                "{} failed on Freshet, so its freshness and throughput were not \
                 measured: {e}",
                settings.view.create_sql()
            );
            eprintln!("[{size} orders] {msg}");
            run.notes.push(msg);
            return Ok(());
        }
    };
    // The initial contents must already be right before changes are timed.
    wait_visible(&t, None, &model.stats(), Instant::now() + settings.timeout).await?;
    let mut rng = phase_rng(settings, size, 2);
    run.freshness =
        phases::freshness(&t, &mut model, &mut rng, settings.changes, settings.timeout).await?;
    let (batch, batches) = (settings.batch, settings.batches);
    run.throughput =
        phases::throughput(&t, &mut model, &mut rng, batch, batches, settings.timeout).await?;
    Ok(())
}

/// Create the tables and COPY the size's data in.
async fn load_step(run: &mut SystemRun, t: &Target, data: &Dataset, size: usize) -> Result<()> {
    eprintln!("[{size} orders] {}: COPY loading", t.system);
    run.load = Some(phases::load(t, data, size).await?);
    Ok(())
}

/// Single-row write latency and the ad-hoc view query: identical on both
/// systems and done before any view exists.
async fn baseline_steps(
    run: &mut SystemRun,
    t: &Target,
    size: usize,
    settings: &Settings,
    model: &mut Model,
) -> Result<()> {
    eprintln!(
        "[{size} orders] {}: {} single-row writes of each kind",
        t.system, settings.changes
    );
    let mut rng = phase_rng(settings, size, 1);
    run.writes = phases::single_row_writes(t, model, &mut rng, settings.changes).await?;
    eprintln!("[{size} orders] {}: the view's query, ad hoc", t.system);
    run.adhoc_query = Some(phases::adhoc_query(t, model).await?);
    Ok(())
}

/// Measure PostgreSQL at one size on a server shared by all sizes.
pub async fn postgres(
    pg: &PgServer,
    data: &Dataset,
    size: usize,
    settings: &Settings,
) -> SystemRun {
    let mut run = SystemRun::default();
    if let Err(e) = postgres_steps(&mut run, pg, data, size, settings).await {
        eprintln!("[{size} orders] PostgreSQL: stopped: {e}");
        run.notes.push(format!("PostgreSQL stopped: {e}"));
    }
    run
}

async fn postgres_steps(
    run: &mut SystemRun,
    pg: &PgServer,
    data: &Dataset,
    size: usize,
    settings: &Settings,
) -> Result<()> {
    let t = Target {
        system: "PostgreSQL",
        writer: pg.connect().await?,
        reader: pg.connect().await?,
    };
    for sql in [
        "DROP MATERIALIZED VIEW IF EXISTS region_stats",
        "DROP TABLE IF EXISTS orders",
        "DROP TABLE IF EXISTS customers",
    ] {
        db::exec(&t.writer, sql, t.system).await?;
    }
    let mut model = data.model.clone();
    load_step(run, &t, data, size).await?;
    // Untimed. Sets hint bits and statistics once, as a DBA would after a
    // bulk load, so that the first REFRESH is not the one paying for them.
    db::exec(&t.writer, "VACUUM ANALYZE customers", t.system).await?;
    db::exec(&t.writer, "VACUUM ANALYZE orders", t.system).await?;
    baseline_steps(run, &t, size, settings, &mut model).await?;
    eprintln!("[{size} orders] PostgreSQL: CREATE MATERIALIZED VIEW and REFRESH");
    run.view_create = Some(phases::create_view(&t, ViewKind::Materialized).await?);
    run.refresh = Some(phases::refresh(&t, &model).await?);
    Ok(())
}
