//! Protocol fuzzing against a running server (issue 14: no client can
//! crash, stall or starve the server).
//!
//! One server takes a few thousand raw TCP connections, each sending one
//! generated case: (a) random bytes or a hostile startup packet before
//! startup, (b) a valid startup then random bytes, (c) well-framed frontend
//! messages with hostile contents (boundary counts, lengths, format codes,
//! `max_rows`, huge or unterminated names, real SQL with placeholders,
//! several statements or invalid UTF-8), (d) mutations of a valid
//! extended-protocol exchange (bit flips, truncation, duplication, deleted
//! or swapped messages, corrupted length fields) and (e) clients that
//! vanish mid-stream. The process must stay up, keep answering `SELECT 1`
//! (checked every [`CHECK_EVERY`] cases), and give back its sockets and
//! memory afterwards. The cases run twice: four at a time, then replayed
//! one at a time, so that memory a case keeps shows up as growth in the
//! replay (see [`RSS_SLACK_KIB`] and [`REPLAY_RSS_SLACK_KIB`]).
//!
//! Every case is a pure function of the seed and its index. Environment:
//!
//! * `FRESHET_PROTOCOL_FUZZ_CASES` — cases per pass (default 2000);
//! * `FRESHET_PROTOCOL_FUZZ_SEED` — the seed (default [`DEFAULT_SEED`], so
//!   CI runs are repeatable; `random` picks one from the clock);
//! * `FRESHET_PROTOCOL_FUZZ_THREADS` — cases in flight at once (default 4);
//! * `FRESHET_PROTOCOL_FUZZ_FAMILIES` — e.g. `cd`: only those generators;
//! * `FRESHET_PROTOCOL_FUZZ_ONLY` — comma-separated case indices to replay
//!   alone, one at a time, with their bytes printed (to reproduce a
//!   failure the test reported).

use std::collections::{BTreeMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::bad_input::{query_message, read_messages, startup_message};
use crate::harness::*;

/// The seed used unless `FRESHET_PROTOCOL_FUZZ_SEED` says otherwise.
const DEFAULT_SEED: u64 = 0x14_f2e5_4e70;

/// Read and write timeout of every fuzz socket: no single read or write
/// can hang a case.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(2);

/// Longest a case may spend reading the server's answer before it gives up
/// and drops the socket (the server then sees a vanished client).
const CASE_BUDGET: Duration = Duration::from_secs(3);

/// Most bytes of answer a case reads before dropping the socket.
const READ_CAP: usize = 4 << 20;

/// How long a case waits for the next byte of an answer it expects before
/// it stops waiting and half-closes.
const READY_IDLE: Duration = Duration::from_millis(100);

/// Liveness is checked through tokio-postgres after this many cases.
const CHECK_EVERY: usize = 200;

/// Allowed growth of the server's resident set over pass 1, from the
/// baseline. The server keeps no state for a connection that is gone, but
/// glibc keeps pages it freed (an arena per thread that allocated, and the
/// high-water mark of several large results at once), and the fuzz's
/// INSERTs add rows to `fz`. Measured with 2,000 cases, 4 in flight,
/// debug build, 2 cores: +65 to +106 MiB over a dozen seeds, nearly all
/// of it from concurrent clients vanishing with large results (families
/// a–d alone: +4 MiB). It is not per case: over 10,000 cases the growth
/// flattens at +114 MiB after 5,000. 192 MiB leaves room for that noise
/// and still catches a leak of 100 KiB per case.
const RSS_SLACK_KIB: u64 = 192 * 1024;

/// Allowed growth over pass 2, which replays pass 1's cases byte for
/// byte but one at a time, from the RSS after pass 1. The allocator
/// already holds most of what four concurrent cases needed, so growth
/// here is mainly memory the cases did not give back. Measured: −14 to
/// +37 MiB over a dozen seeds (2,000 cases are not quite enough to reach
/// the allocator's plateau); replaying 10,000 cases added 11 MiB, i.e.
/// about 1 KiB per case. 64 MiB catches a leak of 32 KiB per case.
const REPLAY_RSS_SLACK_KIB: u64 = 64 * 1024;

/// Descriptors the server may hold above the baseline afterwards (a log,
/// WAL or storage file opened meanwhile).
const FD_SLACK: usize = 3;

// ---------------------------------------------------------------------
// Process probes.

/// Resident set size of a process in KiB (`VmRSS` of `/proc/<pid>/status`).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Whether `pid` still runs (exists and is not a zombie). Cheap enough to
/// ask after every case, from any thread.
fn process_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X") | None)
}

// ---------------------------------------------------------------------
// Frontend message builders.

/// A frontend message: type byte, length, body.
fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

fn cstring(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(s);
    out.push(0);
}

fn parse_msg(name: &[u8], sql: &[u8], oids: &[u32]) -> Vec<u8> {
    let mut b = Vec::new();
    cstring(&mut b, name);
    cstring(&mut b, sql);
    b.extend_from_slice(&(oids.len() as i16).to_be_bytes());
    for oid in oids {
        b.extend_from_slice(&oid.to_be_bytes());
    }
    message(b'P', &b)
}

fn bind_msg(portal: &[u8], stmt: &[u8], params: &[Option<&[u8]>]) -> Vec<u8> {
    let mut b = Vec::new();
    cstring(&mut b, portal);
    cstring(&mut b, stmt);
    b.extend_from_slice(&0i16.to_be_bytes());
    b.extend_from_slice(&(params.len() as i16).to_be_bytes());
    for p in params {
        match p {
            Some(v) => {
                b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                b.extend_from_slice(v);
            }
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    b.extend_from_slice(&0i16.to_be_bytes());
    message(b'B', &b)
}

fn describe_msg(kind: u8, name: &[u8]) -> Vec<u8> {
    let mut b = vec![kind];
    cstring(&mut b, name);
    message(b'D', &b)
}

fn execute_msg(portal: &[u8], max_rows: i32) -> Vec<u8> {
    let mut b = Vec::new();
    cstring(&mut b, portal);
    b.extend_from_slice(&max_rows.to_be_bytes());
    message(b'E', &b)
}

fn close_msg(kind: u8, name: &[u8]) -> Vec<u8> {
    let mut b = vec![kind];
    cstring(&mut b, name);
    message(b'C', &b)
}

fn sync_msg() -> Vec<u8> {
    message(b'S', &[])
}

/// A startup packet with protocol `version` and `params` (key, value).
fn startup_with(version: i32, params: &[(&[u8], &[u8])], terminated: bool) -> Vec<u8> {
    let mut body = version.to_be_bytes().to_vec();
    for (k, v) in params {
        cstring(&mut body, k);
        cstring(&mut body, v);
    }
    if terminated {
        body.push(0);
    }
    let mut msg = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    msg.extend(body);
    msg
}

// ---------------------------------------------------------------------
// Random values, biased to boundaries.

fn pick<'a, T>(rng: &mut StdRng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

fn random_bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let n = rng.random_range(0..=max);
    (0..n).map(|_| rng.random()).collect()
}

/// Bytes without NUL (so a C string stays one field).
fn random_text(rng: &mut StdRng, max: usize) -> Vec<u8> {
    random_bytes(rng, max)
        .into_iter()
        .map(|b| if b == 0 { b'@' } else { b })
        .collect()
}

fn any_i32(rng: &mut StdRng) -> i32 {
    if rng.random_bool(0.75) {
        *pick(
            rng,
            &[
                0,
                1,
                -1,
                2,
                4,
                5,
                8,
                100,
                65_535,
                65_536,
                1 << 20,
                i32::MAX,
                i32::MAX - 4,
                i32::MIN,
                i32::MIN + 1,
            ],
        )
    } else {
        rng.random()
    }
}

fn any_i16(rng: &mut StdRng) -> i16 {
    if rng.random_bool(0.75) {
        // -1 is 65535 on the wire.
        *pick(rng, &[0, 1, 2, 3, -1, -2, i16::MAX, i16::MIN, 255, 256])
    } else {
        rng.random()
    }
}

/// A count field: mostly small and true, sometimes a boundary.
fn count(rng: &mut StdRng) -> i16 {
    if rng.random_bool(0.6) {
        rng.random_range(0..4)
    } else {
        any_i16(rng)
    }
}

/// How many items to actually send for a declared `count`: usually the
/// declared number (capped), sometimes a different one.
fn actual(rng: &mut StdRng, declared: i16) -> usize {
    let exact = declared as u16 as usize;
    if exact <= 16 && rng.random_bool(0.85) {
        exact
    } else if exact == 65_535 && rng.random_bool(0.3) {
        // Really send 65,535 of them.
        exact
    } else {
        rng.random_range(0..5)
    }
}

fn format_code(rng: &mut StdRng) -> i16 {
    if rng.random_bool(0.6) {
        rng.random_range(0..2)
    } else {
        any_i16(rng)
    }
}

fn oid(rng: &mut StdRng) -> u32 {
    let random = rng.random();
    *pick(
        rng,
        &[
            0,
            16,
            17,
            20,
            21,
            23,
            25,
            114,
            700,
            701,
            1043,
            1082,
            1114,
            1184,
            1700,
            2950,
            3802,
            1007,
            u32::MAX,
            random,
        ],
    )
}

/// A statement or portal name: mostly the unnamed one or one a coherent
/// sequence reuses, sometimes huge or binary.
fn name(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..20) {
        0..=7 => Vec::new(),
        8..=11 => b"s1".to_vec(),
        12..=14 => b"p1".to_vec(),
        15 => format!("n{}", rng.random_range(0..1000)).into_bytes(),
        16 => vec![b'n'; rng.random_range(1_000..70_000)],
        _ => random_text(rng, 40),
    }
}

/// Real statements (and a few broken ones) the server parses and plans.
const SQL: &[&[u8]] = &[
    b"SELECT 1",
    b"SELECT $1",
    b"SELECT $1::int + $2::int",
    b"SELECT $1::text, $2::bigint, $3::bool",
    b"SELECT $1::int8 + 1",
    b"SELECT $65535::int",
    b"SELECT $0",
    b"SELECT $2147483648",
    b"SELECT 1; SELECT 2",
    b"SELECT 1; SELEC 2; SELECT 3",
    b"BEGIN; SELECT 1; COMMIT",
    b"BEGIN",
    b"COMMIT",
    b"ROLLBACK",
    b"SELECT * FROM fz WHERE a = $1",
    b"SELECT a, b FROM fz ORDER BY a LIMIT 5",
    b"SELECT count(*) FROM fz",
    b"INSERT INTO fz VALUES ($1, $2)",
    b"INSERT INTO fz VALUES (1, 'x'); SELECT count(*) FROM fz",
    b"UPDATE fz SET b = $1 WHERE a = $2",
    b"DELETE FROM fz WHERE a = -1",
    b"SELECT * FROM generate_series(1, 1000)",
    b"SELECT * FROM generate_series(1, $1::int)",
    b"COPY fz FROM STDIN",
    b"COPY fz TO STDOUT",
    b"COPY (SELECT 1) TO STDOUT",
    b"COPY (SUBSCRIBE fz) TO STDOUT",
    b"SUBSCRIBE fz",
    b"SET statement_timeout = '1s'",
    b"SET search_path = nowhere",
    b"SHOW ALL",
    b"EXPLAIN SELECT * FROM fz WHERE a = 1",
    b"SELECT * FROM nosuch",
    b"",
    b";",
    b";;;",
    b" ",
    b"SELECT '\xff\xfe'",
    b"SELECT \xc3\x28",
    b"SELECT 'caf\xc3\xa9'",
    b"SELECT 1 /* unterminated",
    b"SELECT '",
    b"SELECT $1 FROM fz WHERE a = $1 AND b = $2",
    b"DECLARE c CURSOR FOR SELECT 1",
    b"FETCH 1 FROM c",
    b"PREPARE p AS SELECT $1::int",
    b"EXECUTE p(1)",
    b"DEALLOCATE ALL",
    b"DISCARD ALL",
    b"LISTEN x",
];

fn sql(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..20) {
        0 => random_text(rng, 64),
        // Statements glued together, some of them with placeholders.
        1 => {
            let a = *pick(rng, SQL);
            let b = *pick(rng, SQL);
            [a, b";", b].concat()
        }
        _ => pick(rng, SQL).to_vec(),
    }
}

/// A parameter value: text the server may parse, binary, or noise.
fn param_value(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..8) {
        0 => b"1".to_vec(),
        1 => b"-2147483649".to_vec(),
        2 => b"99999999999999999999999".to_vec(),
        3 => b"t".to_vec(),
        4 => 7i32.to_be_bytes().to_vec(),
        5 => b"\xff\xfe".to_vec(),
        6 => Vec::new(),
        _ => random_bytes(rng, 24),
    }
}

/// A C string field, sometimes without its terminating NUL.
fn field(out: &mut Vec<u8>, s: &[u8], rng: &mut StdRng) {
    out.extend_from_slice(s);
    if !rng.random_bool(0.03) {
        out.push(0);
    }
}

/// Frame `body` as message `kind`, now and then with trailing junk inside
/// the frame or a body cut short.
fn frame(rng: &mut StdRng, kind: u8, mut body: Vec<u8>) -> Vec<u8> {
    match rng.random_range(0..40) {
        0 => body.extend(random_bytes(rng, 16)),
        1 if !body.is_empty() => {
            let keep = rng.random_range(0..body.len());
            body.truncate(keep);
        }
        _ => {}
    }
    message(kind, &body)
}

fn hostile_parse(rng: &mut StdRng) -> Vec<u8> {
    let mut b = Vec::new();
    field(&mut b, &name(rng), rng);
    field(&mut b, &sql(rng), rng);
    let declared = count(rng);
    b.extend_from_slice(&declared.to_be_bytes());
    for _ in 0..actual(rng, declared) {
        b.extend_from_slice(&oid(rng).to_be_bytes());
    }
    frame(rng, b'P', b)
}

/// A count of format codes, then (maybe fewer or more than it says) codes.
fn push_format_codes(b: &mut Vec<u8>, rng: &mut StdRng) {
    let formats = count(rng);
    b.extend_from_slice(&formats.to_be_bytes());
    for _ in 0..actual(rng, formats) {
        b.extend_from_slice(&format_code(rng).to_be_bytes());
    }
}

fn hostile_bind(rng: &mut StdRng) -> Vec<u8> {
    let mut b = Vec::new();
    field(&mut b, &name(rng), rng);
    field(&mut b, &name(rng), rng);
    push_format_codes(&mut b, rng);
    let params = count(rng);
    b.extend_from_slice(&params.to_be_bytes());
    for _ in 0..actual(rng, params) {
        let value = param_value(rng);
        let len = match rng.random_range(0..10) {
            0 => -1,
            1 => any_i32(rng),
            _ => value.len() as i32,
        };
        b.extend_from_slice(&len.to_be_bytes());
        if len != -1 {
            b.extend_from_slice(&value);
        }
    }
    push_format_codes(&mut b, rng);
    frame(rng, b'B', b)
}

fn target_kind(rng: &mut StdRng) -> u8 {
    let random = rng.random();
    *pick(rng, &[b'S', b'P', b'S', b'P', 0, b'X', random])
}

fn hostile_describe_or_close(rng: &mut StdRng, kind: u8) -> Vec<u8> {
    let mut b = vec![target_kind(rng)];
    field(&mut b, &name(rng), rng);
    frame(rng, kind, b)
}

fn hostile_execute(rng: &mut StdRng) -> Vec<u8> {
    let mut b = Vec::new();
    field(&mut b, &name(rng), rng);
    let max_rows = if rng.random_bool(0.4) {
        0
    } else {
        any_i32(rng)
    };
    b.extend_from_slice(&max_rows.to_be_bytes());
    frame(rng, b'E', b)
}

fn hostile_function_call(rng: &mut StdRng) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(oid(rng) as i32).to_be_bytes());
    push_format_codes(&mut b, rng);
    let args = count(rng);
    b.extend_from_slice(&args.to_be_bytes());
    for _ in 0..actual(rng, args) {
        let value = param_value(rng);
        b.extend_from_slice(&(value.len() as i32).to_be_bytes());
        b.extend_from_slice(&value);
    }
    b.extend_from_slice(&format_code(rng).to_be_bytes());
    frame(rng, b'F', b)
}

fn copy_data(rng: &mut StdRng) -> Vec<u8> {
    let body = match rng.random_range(0..5) {
        0 => b"1\tone\n2\ttwo\n".to_vec(),
        1 => b"\\.\n".to_vec(),
        2 => b"not\ta\tnumber\tat all\n".to_vec(),
        3 => vec![b'x'; rng.random_range(0..100_000)],
        _ => random_bytes(rng, 200),
    };
    frame(rng, b'd', body)
}

/// One well-framed frontend message with hostile contents; its type, for
/// the case's label.
fn hostile_message(rng: &mut StdRng) -> (char, Vec<u8>) {
    let kind = *pick(rng, b"PPBBDEECSHQQdcfFXp?");
    let msg = match kind {
        b'P' => hostile_parse(rng),
        b'B' => hostile_bind(rng),
        b'D' | b'C' => hostile_describe_or_close(rng, kind),
        b'E' => hostile_execute(rng),
        b'S' | b'H' | b'c' | b'X' => {
            let body = if rng.random_bool(0.9) {
                Vec::new()
            } else {
                random_bytes(rng, 8)
            };
            message(kind, &body)
        }
        b'Q' => {
            let mut b = Vec::new();
            field(&mut b, &sql(rng), rng);
            frame(rng, b'Q', b)
        }
        b'd' => copy_data(rng),
        b'f' => {
            let mut b = Vec::new();
            field(&mut b, &random_text(rng, 40), rng);
            frame(rng, b'f', b)
        }
        b'F' => hostile_function_call(rng),
        b'p' => {
            let mut b = Vec::new();
            field(&mut b, &random_text(rng, 40), rng);
            frame(rng, b'p', b)
        }
        _ => {
            // A type byte no frontend message has.
            let random = rng.random();
            let kind = *pick(rng, &[0, b'A', b'Z', b'~', 0x7f, 0xff, random]);
            let body = random_bytes(rng, 32);
            frame(rng, kind, body)
        }
    };
    (kind as char, msg)
}

// ---------------------------------------------------------------------
// Cases.

/// How a case ends once everything is written.
#[derive(Debug, Clone, Copy)]
enum End {
    /// Read until `ready` ReadyForQuery messages came (or the server
    /// went quiet for [`READY_IDLE`]), then half-close and read until EOF,
    /// an error, the budget or the cap. Waiting first lets the server run
    /// what it was sent: it treats end-of-input as a client that left and
    /// cancels the statement in progress.
    Drain { ready: usize },
    /// Drop the socket after this long without reading anything.
    Vanish(Duration),
}

/// One connection's worth of input.
#[derive(Debug, Clone)]
struct Case {
    /// The generator (`a`..`e`) and a short description.
    family: char,
    label: String,
    /// Written in order; after the first, when `wait_ready`, the answer is
    /// read up to ReadyForQuery before the rest is sent.
    writes: Vec<Vec<u8>>,
    wait_ready: bool,
    /// Pause between writes (a client trickling bytes).
    pause: Option<Duration>,
    end: End,
}

impl Case {
    fn new(family: char, label: String, writes: Vec<Vec<u8>>) -> Case {
        Case {
            family,
            label,
            writes,
            wait_ready: false,
            pause: None,
            end: End::Drain { ready: 0 },
        }
    }

    fn bytes(&self) -> usize {
        self.writes.iter().map(Vec::len).sum()
    }
}

/// The RNG of case `index`: independent of every other case, so any case
/// can be replayed alone.
fn case_rng(seed: u64, index: usize) -> StdRng {
    let mut z = seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // splitmix64's finalizer, so neighbouring indices differ in every bit.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    StdRng::seed_from_u64(z ^ (z >> 31))
}

fn generate(seed: u64, index: usize) -> Case {
    let mut rng = case_rng(seed, index);
    let rng = &mut rng;
    let mut family = match rng.random_range(0..100) {
        0..=9 => 'a',
        10..=24 => 'b',
        25..=59 => 'c',
        60..=84 => 'd',
        _ => 'e',
    };
    if let Some(only) = families()
        && !only.contains(family)
    {
        let allowed: Vec<char> = only.chars().collect();
        family = *pick(rng, &allowed);
    }
    match family {
        'a' => before_startup(rng),
        'b' => startup_then_random(rng),
        'c' => structured(rng),
        'd' => mutated_exchange(rng),
        _ => vanishing(rng),
    }
}

/// `FRESHET_PROTOCOL_FUZZ_FAMILIES`, e.g. `cd`: generate only those
/// families (the cases then differ from an unrestricted run's).
fn families() -> Option<&'static str> {
    static FAMILIES: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    FAMILIES
        .get_or_init(|| {
            std::env::var("FRESHET_PROTOCOL_FUZZ_FAMILIES")
                .ok()
                .map(|f| f.chars().filter(|c| ('a'..='e').contains(c)).collect())
                .filter(|f: &String| !f.is_empty())
        })
        .as_deref()
}

/// (a) Random bytes, or a hostile startup-phase packet, before startup.
fn before_startup(rng: &mut StdRng) -> Case {
    let (label, bytes) = match rng.random_range(0..12) {
        0..=2 => ("random bytes".to_string(), random_bytes(rng, 2048)),
        3 => {
            // A plausible length prefix, then noise.
            let mut b = any_i32(rng).to_be_bytes().to_vec();
            b.extend(random_bytes(rng, 64));
            ("length + noise".into(), b)
        }
        4 => {
            // SSLRequest, then noise (or a real startup).
            let mut b = startup_with(80_877_103, &[], false);
            if rng.random_bool(0.5) {
                b.extend(startup_message());
                b.extend(query_message("SELECT 1"));
            } else {
                b.extend(random_bytes(rng, 64));
            }
            ("SSLRequest then ...".into(), b)
        }
        5 => {
            // GSSENCRequest, CancelRequest with random keys or wrong length.
            let code: i32 = *pick(rng, &[80_877_104, 80_877_102, 80_877_105]);
            let mut body = code.to_be_bytes().to_vec();
            body.extend(random_bytes(rng, 12));
            let mut b = ((body.len() + 4) as i32).to_be_bytes().to_vec();
            b.extend(body);
            (format!("special request {code}"), b)
        }
        6 => {
            let version = *pick(
                rng,
                &[0, 0x0002_0000, 0x0003_0001, 0x0003_ffff, -1, 0x0004_0000],
            );
            (
                format!("startup version {version:#x}"),
                startup_with(
                    version,
                    &[(b"user".as_slice(), b"freshet".as_slice())],
                    true,
                ),
            )
        }
        7 => {
            // Parameters: huge, missing, odd, unterminated, binary.
            let huge = vec![b'v'; rng.random_range(5_000..20_000)];
            let bin = random_text(rng, 30);
            let (huge, bin) = (huge.as_slice(), bin.as_slice());
            let user: &[u8] = b"user";
            let freshet: &[u8] = b"freshet";
            let params: Vec<(&[u8], &[u8])> = match rng.random_range(0..6) {
                0 => vec![(user, huge)],
                1 => vec![(b"database".as_slice(), freshet)],
                2 => vec![(user, freshet), (b"database".as_slice(), bin)],
                3 => vec![(user, bin), (bin, b"x".as_slice())],
                4 => vec![
                    (user, freshet),
                    (
                        b"options".as_slice(),
                        b"-c statement_timeout=1 -c search_path=\xff".as_slice(),
                    ),
                    (b"replication".as_slice(), b"database".as_slice()),
                ],
                _ => vec![(user, freshet), (user, b"other".as_slice())],
            };
            let mut b = startup_with(196_608, &params, rng.random_bool(0.7));
            b.extend(query_message("SELECT 1"));
            ("startup with hostile parameters".into(), b)
        }
        8 => {
            // A startup whose length field lies.
            let mut b = startup_message();
            let len = any_i32(rng);
            b[..4].copy_from_slice(&len.to_be_bytes());
            (format!("startup length {len}"), b)
        }
        9 => {
            // An odd number of strings.
            let mut body = 196_608i32.to_be_bytes().to_vec();
            for s in [&b"user"[..], b"freshet", b"database"] {
                cstring(&mut body, s);
            }
            body.push(0);
            let mut b = ((body.len() + 4) as i32).to_be_bytes().to_vec();
            b.extend(body);
            ("startup with a key and no value".into(), b)
        }
        10 => {
            // A frontend message where startup belongs.
            let (kind, m) = hostile_message(rng);
            (format!("message {kind} before startup"), m)
        }
        _ => (
            "HTTP".into(),
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_vec(),
        ),
    };
    let mut case = Case::new('a', label, vec![bytes]);
    if rng.random_bool(0.2) {
        case.end = End::Vanish(Duration::ZERO);
    }
    case
}

/// (b) A valid startup, then random bytes.
fn startup_then_random(rng: &mut StdRng) -> Case {
    let mut noise = random_bytes(rng, 1024);
    if !noise.is_empty() && rng.random_bool(0.5) {
        // Start with a real message type so the noise reaches a decoder.
        noise[0] = *pick(rng, b"QPBEDCSHdcfFp");
    }
    let label = format!(
        "startup + {} random bytes{}",
        noise.len(),
        noise
            .first()
            .map(|b| format!(" starting {:?}", *b as char))
            .unwrap_or_default()
    );
    let mut case = Case::new('b', label, vec![startup_message(), noise]);
    case.wait_ready = rng.random_bool(0.7);
    case
}

/// (c) Well-framed frontend messages with hostile contents.
fn structured(rng: &mut StdRng) -> Case {
    let mut msgs = Vec::new();
    let mut kinds = String::new();
    if rng.random_bool(0.4) {
        // Start from a coherent sequence so later messages find a
        // statement and a portal.
        let sql = sql(rng);
        msgs.push(parse_msg(b"s1", &sql, &[]));
        let p: &[u8] = b"1";
        msgs.push(bind_msg(b"p1", b"s1", &[Some(p), None]));
        kinds.push_str("P(s1) B(p1) ");
    }
    for _ in 0..rng.random_range(1..=10) {
        let (kind, m) = hostile_message(rng);
        kinds.push(kind);
        kinds.push(' ');
        msgs.push(m);
    }
    if rng.random_bool(0.7) {
        msgs.push(sync_msg());
        kinds.push('S');
    }
    let mut writes = vec![startup_message()];
    if rng.random_bool(0.3) {
        writes.extend(msgs);
    } else {
        writes.push(msgs.concat());
    }
    let mut case = Case::new('c', format!("messages {}", kinds.trim_end()), writes);
    case.wait_ready = rng.random_bool(0.8);
    // A ReadyForQuery per Query and per Sync, and one after startup.
    let answers = kinds.split(' ').filter(|k| *k == "Q" || *k == "S").count();
    case.end = End::Drain {
        ready: answers + usize::from(!case.wait_ready),
    };
    case
}

/// A valid extended-protocol exchange, message by message (the startup
/// first).
fn valid_exchange(rng: &mut StdRng) -> Vec<Vec<u8>> {
    let mut m = vec![startup_message()];
    match rng.random_range(0..4) {
        0 => {
            m.push(parse_msg(b"s1", b"SELECT $1::int + $2::int", &[23, 23]));
            m.push(describe_msg(b'S', b"s1"));
            m.push(bind_msg(b"p1", b"s1", &[Some(b"1"), Some(b"2")]));
            m.push(describe_msg(b'P', b"p1"));
            m.push(execute_msg(b"p1", 0));
            m.push(sync_msg());
            m.push(close_msg(b'S', b"s1"));
            m.push(sync_msg());
        }
        1 => {
            m.push(parse_msg(b"", b"INSERT INTO fz VALUES ($1, $2)", &[]));
            m.push(bind_msg(b"", b"", &[Some(b"7"), Some(b"seven")]));
            m.push(execute_msg(b"", 0));
            m.push(parse_msg(b"", b"SELECT * FROM fz WHERE a = $1", &[20]));
            m.push(bind_msg(b"", b"", &[Some(b"7")]));
            m.push(execute_msg(b"", 1));
            m.push(execute_msg(b"", 1));
            m.push(sync_msg());
        }
        2 => {
            m.push(query_message("COPY fz FROM STDIN"));
            m.push(message(b'd', b"11\televen\n12\ttwelve\n"));
            m.push(message(b'c', &[]));
            m.push(query_message("SELECT count(*) FROM fz"));
        }
        _ => {
            m.push(query_message("BEGIN"));
            m.push(parse_msg(
                b"q",
                b"SELECT * FROM generate_series(1, 20)",
                &[],
            ));
            m.push(bind_msg(b"c1", b"q", &[]));
            m.push(execute_msg(b"c1", 3));
            m.push(message(b'H', &[]));
            m.push(execute_msg(b"c1", 3));
            m.push(close_msg(b'P', b"c1"));
            m.push(sync_msg());
            m.push(query_message("COMMIT"));
        }
    }
    if rng.random_bool(0.3) {
        m.push(message(b'X', &[]));
    }
    m
}

/// (d) Mutations of a valid exchange.
fn mutated_exchange(rng: &mut StdRng) -> Case {
    let mut m = valid_exchange(rng);
    let mut what = Vec::new();
    let mut cut_stream = None;
    for _ in 0..rng.random_range(1..=3) {
        // Mostly leave the startup alone, so the mutations reach the
        // message decoder.
        let lo = if rng.random_bool(0.9) { 1 } else { 0 };
        let i = rng.random_range(lo..m.len());
        if m[i].is_empty() {
            // Truncated to nothing by an earlier mutation.
            continue;
        }
        let len_at = if i == 0 { 0 } else { 1 };
        match rng.random_range(0..9) {
            0 => {
                let pos = rng.random_range(0..m[i].len());
                m[i][pos] ^= 1 << rng.random_range(0..8);
                what.push(format!("flip #{i}@{pos}"));
            }
            1 => {
                let keep = rng.random_range(0..m[i].len());
                m[i].truncate(keep);
                what.push(format!("truncate #{i} to {keep}"));
            }
            2 => {
                let j = rng.random_range(1..=m.len());
                let copy = m[i].clone();
                m.insert(j, copy);
                what.push(format!("duplicate #{i} at {j}"));
            }
            3 if m.len() > 2 => {
                m.remove(i);
                what.push(format!("delete #{i}"));
            }
            4 => {
                let j = rng.random_range(lo..m.len());
                m.swap(i, j);
                what.push(format!("swap #{i} #{j}"));
            }
            5 | 6 if m[i].len() >= len_at + 4 => {
                let true_len = (m[i].len() - len_at) as i32;
                let len = if rng.random_bool(0.5) {
                    any_i32(rng)
                } else {
                    true_len + rng.random_range(-5..=5)
                };
                m[i][len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
                what.push(format!("length #{i}={len}"));
            }
            7 => {
                let pos = rng.random_range(0..=m[i].len());
                let junk = random_bytes(rng, 16);
                what.push(format!("insert {} bytes into #{i}@{pos}", junk.len()));
                m[i].splice(pos..pos, junk);
            }
            _ => {
                if i > 0 {
                    m[i][0] = rng.random();
                    what.push(format!("type #{i}={:#x}", m[i][0]));
                } else {
                    cut_stream = Some(rng.random_range(0..200));
                }
            }
        }
    }
    // What the exchange would be answered with if the mutations did not
    // matter: a ReadyForQuery after startup and per Query or Sync.
    let ready = 1 + m[1..]
        .iter()
        .filter(|msg| matches!(msg.first(), Some(b'Q' | b'S')))
        .count();
    let mut stream = m.concat();
    if let Some(cut) = cut_stream {
        let cut = cut.min(stream.len());
        stream.truncate(cut);
        what.push(format!("stream cut at {cut}"));
    }
    // Sometimes in small pieces, to exercise partial reads.
    let writes = if rng.random_bool(0.25) {
        let mut pieces = Vec::new();
        let mut rest = stream.as_slice();
        while !rest.is_empty() {
            let n = rng.random_range(1..=rest.len().min(64));
            pieces.push(rest[..n].to_vec());
            rest = &rest[n..];
        }
        pieces
    } else {
        vec![stream]
    };
    let mut case = Case::new('d', format!("exchange, {}", what.join(", ")), writes);
    if case.writes.len() > 1 && rng.random_bool(0.2) {
        case.pause = Some(Duration::from_millis(1));
    }
    case.end = End::Drain { ready };
    case
}

/// (e) Valid input, then the client vanishes without reading.
fn vanishing(rng: &mut StdRng) -> Case {
    let (label, rest): (&str, Vec<u8>) = match rng.random_range(0..7) {
        0 => (
            "a query with a big result",
            query_message("SELECT * FROM generate_series(1, 200000)"),
        ),
        1 => {
            let q = query_message("SELECT * FROM generate_series(1, 1000)");
            let half = rng.random_range(1..q.len());
            ("half a Query", q[..half].to_vec())
        }
        2 => (
            "Parse, Bind, Execute without Sync",
            [
                parse_msg(b"", b"SELECT * FROM generate_series(1, 50000)", &[]),
                bind_msg(b"", b"", &[]),
                execute_msg(b"", 0),
            ]
            .concat(),
        ),
        3 => (
            "COPY FROM STDIN left open",
            [
                query_message("COPY fz FROM STDIN"),
                message(b'd', b"100\thundred\n"),
            ]
            .concat(),
        ),
        4 => (
            "SUBSCRIBE left running",
            query_message("COPY (SUBSCRIBE fz) TO STDOUT"),
        ),
        5 => (
            "an open transaction with a write",
            query_message("BEGIN; INSERT INTO fz VALUES (200, 'open')"),
        ),
        _ => (
            "a suspended portal",
            [
                query_message("BEGIN"),
                parse_msg(b"", b"SELECT * FROM generate_series(1, 100)", &[]),
                bind_msg(b"cur", b"", &[]),
                execute_msg(b"cur", 1),
                message(b'H', &[]),
            ]
            .concat(),
        ),
    };
    let after = Duration::from_millis(*pick(rng, &[0, 0, 1, 10, 50]));
    let mut case = Case::new(
        'e',
        format!("{label}, vanish after {after:?}"),
        vec![startup_message(), rest],
    );
    case.wait_ready = rng.random_bool(0.7);
    case.end = End::Vanish(after);
    case
}

// ---------------------------------------------------------------------
// Running cases.

/// How a case's connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// The server closed the connection (after our half-close or earlier).
    Eof,
    /// Connection reset or another read error.
    Reset,
    /// No byte arrived for `SOCKET_TIMEOUT` while the connection stayed
    /// open after our half-close.
    Timeout,
    /// The server kept sending past `CASE_BUDGET` or `READ_CAP`.
    StillSending,
    /// We dropped the socket on purpose.
    Vanished,
    /// The TCP connect itself failed.
    ConnectFailed,
}

fn run_case(port: u16, case: &Case) -> Outcome {
    let start = Instant::now();
    let Ok(mut sock) = TcpStream::connect(("127.0.0.1", port)) else {
        return Outcome::ConnectFailed;
    };
    let _ = sock.set_read_timeout(Some(SOCKET_TIMEOUT));
    let _ = sock.set_write_timeout(Some(SOCKET_TIMEOUT));
    let _ = sock.set_nodelay(true);
    for (i, w) in case.writes.iter().enumerate() {
        if i > 0
            && let Some(p) = case.pause
        {
            std::thread::sleep(p);
        }
        if sock.write_all(w).is_err() {
            // The server closed on us: read what it said, below.
            break;
        }
        if i == 0 && case.wait_ready {
            let _ = read_messages(&mut sock);
        }
    }
    match case.end {
        End::Vanish(after) => {
            std::thread::sleep(after);
            drop(sock);
            Outcome::Vanished
        }
        End::Drain { ready } => {
            if let Some(outcome) = await_ready(&mut sock, ready, start) {
                return outcome;
            }
            let _ = sock.shutdown(Shutdown::Write);
            let mut buf = vec![0u8; 64 << 10];
            let mut total = 0;
            loop {
                if start.elapsed() > CASE_BUDGET || total > READ_CAP {
                    return Outcome::StillSending;
                }
                match sock.read(&mut buf) {
                    Ok(0) => return Outcome::Eof,
                    Ok(n) => total += n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        return Outcome::Timeout;
                    }
                    Err(_) => return Outcome::Reset,
                }
            }
        }
    }
}

/// Cases that stopped waiting for an answer after [`READY_IDLE`].
static QUIET: AtomicUsize = AtomicUsize::new(0);

/// Read backend messages until `expect` ReadyForQuery messages came, the
/// server is quiet for [`READY_IDLE`] (`None`: go on and half-close), or
/// the connection ended (its outcome).
fn await_ready(sock: &mut TcpStream, expect: usize, start: Instant) -> Option<Outcome> {
    if expect == 0 {
        return None;
    }
    let _ = sock.set_read_timeout(Some(READY_IDLE));
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let (mut seen, mut total) = (0, 0);
    while seen < expect {
        if start.elapsed() > CASE_BUDGET || total > READ_CAP {
            return Some(Outcome::StillSending);
        }
        match sock.read(&mut buf) {
            Ok(0) => return Some(Outcome::Eof),
            Ok(n) => {
                total += n;
                pending.extend_from_slice(&buf[..n]);
                // Count the complete messages; keep a partial one.
                let mut at = 0;
                while pending.len() - at >= 5 {
                    let len = i32::from_be_bytes([
                        pending[at + 1],
                        pending[at + 2],
                        pending[at + 3],
                        pending[at + 4],
                    ]);
                    let Ok(len) = usize::try_from(len) else { break };
                    if pending.len() - at < 1 + len {
                        break;
                    }
                    seen += usize::from(pending[at] == b'Z');
                    at += 1 + len;
                }
                pending.drain(..at);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                QUIET.fetch_add(1, Ordering::Relaxed);
                break;
            }
            Err(_) => return Some(Outcome::Reset),
        }
    }
    let _ = sock.set_read_timeout(Some(SOCKET_TIMEOUT));
    None
}

fn hex(bytes: &[u8], max: usize) -> String {
    let shown: String = bytes.iter().take(max).map(|b| format!("{b:02x}")).collect();
    if bytes.len() > max {
        format!("{shown}... ({} bytes)", bytes.len())
    } else {
        shown
    }
}

fn describe(seed: u64, index: usize, case: &Case, max_hex: usize) -> String {
    let writes: Vec<String> = case.writes.iter().map(|w| hex(w, max_hex)).collect();
    format!(
        "case {index} (seed {seed:#x}), family {}: {} [wait_ready {}, pause {:?}, end {:?}; {} bytes]\n    writes: {}",
        case.family,
        case.label,
        case.wait_ready,
        case.pause,
        case.end,
        case.bytes(),
        writes.join(" | ")
    )
}

/// What the cases did, for the summary and the failure messages.
#[derive(Default)]
struct Tally {
    families: BTreeMap<char, usize>,
    outcomes: BTreeMap<String, usize>,
    /// Cases that timed out or kept sending (the server held the
    /// connection open after the client's half-close).
    held_open: Vec<String>,
    connect_failures: Vec<String>,
    slowest: Option<(Duration, String)>,
    /// The case after which the process was found dead, and the cases in
    /// flight or just before it.
    death: Option<String>,
}

/// Run cases `indices` with `threads` in flight at once.
fn run_cases(
    port: u16,
    pid: u32,
    seed: u64,
    indices: &[usize],
    threads: usize,
    tally: &Mutex<Tally>,
) {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let recent: Mutex<VecDeque<usize>> = Mutex::new(VecDeque::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&index) = indices.get(k) else { return };
                    let case = generate(seed, index);
                    {
                        let mut r = recent.lock().unwrap();
                        r.push_back(index);
                        if r.len() > 2 * threads + 2 {
                            r.pop_front();
                        }
                    }
                    let started = Instant::now();
                    let outcome = run_case(port, &case);
                    let took = started.elapsed();
                    let alive = process_alive(pid);
                    let mut t = tally.lock().unwrap();
                    *t.families.entry(case.family).or_default() += 1;
                    *t.outcomes.entry(format!("{outcome:?}")).or_default() += 1;
                    match outcome {
                        Outcome::Timeout | Outcome::StillSending if t.held_open.len() < 20 => {
                            t.held_open
                                .push(format!("{outcome:?} after {took:?}: {}", describe(seed, index, &case, 64)));
                        }
                        Outcome::ConnectFailed => t
                            .connect_failures
                            .push(describe(seed, index, &case, 64)),
                        _ => {}
                    }
                    if t.slowest.as_ref().is_none_or(|(d, _)| took > *d) {
                        t.slowest = Some((took, format!("case {index}: {}", case.label)));
                    }
                    if !alive && t.death.is_none() {
                        let around: Vec<String> = recent
                            .lock()
                            .unwrap()
                            .iter()
                            .map(|&i| describe(seed, i, &generate(seed, i), 256))
                            .collect();
                        t.death = Some(format!(
                            "the server died after {} (in flight or just before, with {threads} \
                             thread(s); replay each with FRESHET_PROTOCOL_FUZZ_ONLY=<index>):\n  {}",
                            describe(seed, index, &case, 1024),
                            around.join("\n  ")
                        ));
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            });
        }
    });
}

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number")),
        Err(_) => default,
    }
}

fn fuzz_seed() -> u64 {
    match std::env::var("FRESHET_PROTOCOL_FUZZ_SEED") {
        Ok(v) if v == "random" => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        Ok(v) => {
            let parsed = match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => v.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("FRESHET_PROTOCOL_FUZZ_SEED={v} is not a number"))
        }
        Err(_) => DEFAULT_SEED,
    }
}

/// The server is up and a new tokio-postgres session gets `SELECT 1`
/// answered within 20 s.
async fn assert_serving(s: &mut Server, seed: u64, done: usize, tally: &Mutex<Tally>) {
    if let Some(death) = &tally.lock().unwrap().death {
        panic!("protocol fuzz, seed {seed:#x}: {death}");
    }
    assert!(
        s.is_running(),
        "protocol fuzz, seed {seed:#x}: the server exited within the first {done} cases"
    );
    let answer = tokio::time::timeout(Duration::from_secs(20), async {
        let c = s.connect_db("freshet").await?;
        c.simple_query("SELECT 1").await.map(|_| ())
    })
    .await;
    match answer {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            panic!("protocol fuzz, seed {seed:#x}: SELECT 1 failed after {done} cases: {e:?}")
        }
        Err(_) => panic!(
            "protocol fuzz, seed {seed:#x}: SELECT 1 took over 20 s after {done} cases (server stalled)"
        ),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn random_and_structured_messages_never_take_the_server_down() {
    let seed = fuzz_seed();
    let cases: usize = env_number("FRESHET_PROTOCOL_FUZZ_CASES", 2000);
    let only: Option<Vec<usize>> = std::env::var("FRESHET_PROTOCOL_FUZZ_ONLY").ok().map(|v| {
        v.split(',')
            .map(|i| {
                i.trim()
                    .parse()
                    .expect("FRESHET_PROTOCOL_FUZZ_ONLY: case indices")
            })
            .collect()
    });
    let threads: usize = if only.is_some() {
        1
    } else {
        env_number("FRESHET_PROTOCOL_FUZZ_THREADS", 4)
    };
    println!(
        "protocol fuzz: seed {seed:#x} (FRESHET_PROTOCOL_FUZZ_SEED), {} case(s), {threads} thread(s)",
        only.as_ref().map_or(cases, Vec::len)
    );
    let started = Instant::now();
    let mut s = Server::start();
    let pid = s.pid().expect("server running");

    // Warm-up: the table the statements use, and ordinary sessions of
    // both protocols, so the baseline includes warm caches and arenas.
    {
        let c = s.connect().await;
        c.batch_execute(
            "CREATE TABLE fz (a bigint, b text);
             INSERT INTO fz SELECT value, 'row ' || value FROM generate_series(1, 100);
             CREATE INDEX fz_a ON fz (a)",
        )
        .await
        .unwrap();
        for _ in 0..5 {
            let c = s.connect().await;
            assert_eq!(value(&c, "SELECT 1").await.as_deref(), Some("1"));
            let stmt = c.prepare("SELECT b FROM fz WHERE a = $1").await.unwrap();
            c.query(&stmt, &[&7i64]).await.unwrap();
            c.simple_query("SELECT count(*) FROM fz; SELECT * FROM generate_series(1, 1000)")
                .await
                .unwrap();
        }
        // One message pgwire's decoder panics on: a Parse declaring three
        // parameter types and carrying one (pgwire 0.41 decodes past the
        // end of the message and runs out of buffer). The server contains
        // the panic; any one-time cost of a first panic belongs in the
        // baseline (a symbolized backtrace once cost ~300 MiB that stayed;
        // the hook no longer symbolizes).
        {
            let port = s.port;
            tokio::task::block_in_place(|| {
                let mut case = Case::new('c', "warm-up panic".into(), Vec::new());
                let parse = message(b'P', b"\0SELECT 1\0\x00\x03\x00\x00\x00\x17");
                case.writes = vec![startup_message(), [parse, sync_msg()].concat()];
                case.wait_ready = true;
                run_case(port, &case)
            });
        }
        // A few cases of every family, through the same path as the run
        // (not when replaying cases: those run alone).
        if only.is_none() {
            let warm: Vec<usize> = (0..40).map(|i| usize::MAX - i).collect();
            let t = Mutex::new(Tally::default());
            run_cases(s.port, pid, seed, &warm, threads, &t);
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let fds_before = s.open_fds();
    let rss_before = rss_kib(pid);
    println!(
        "protocol fuzz: baseline {fds_before} fds, RSS {} MiB",
        rss_before / 1024
    );

    let tally = Mutex::new(Tally::default());
    let mut done = 0;
    if let Some(only) = &only {
        // One at a time, each with its bytes and what it did to the process.
        for &i in only {
            let case = generate(seed, i);
            println!("{}", describe(seed, i, &case, 1 << 16));
            let (rss, fds) = (rss_kib(pid), s.open_fds());
            let port = s.port;
            let outcome = tokio::task::block_in_place(|| run_case(port, &case));
            tokio::time::sleep(Duration::from_millis(50)).await;
            println!(
                "  -> {outcome:?}; RSS {} -> {} MiB, fds {fds} -> {}, alive {}",
                rss / 1024,
                rss_kib(pid) / 1024,
                s.open_fds(),
                process_alive(pid)
            );
            done += 1;
        }
    }
    let indices: Vec<usize> = match only {
        Some(_) => Vec::new(),
        None => (0..cases).collect(),
    };
    // Pass 1 runs the cases, `threads` at a time. Pass 2 replays exactly
    // the same bytes one case at a time: the allocator already holds more
    // than one case at a time needs, so growth in pass 2 is memory that
    // cases did not give back, not allocator high-water marks.
    let passes = if indices.is_empty() { 0 } else { 2 };
    let mut max_fds = fds_before;
    let mut rss_after = Vec::new();
    for pass in 1..=passes {
        let pass_started = Instant::now();
        for chunk in indices.chunks(CHECK_EVERY) {
            let (port, chunk_vec) = (s.port, chunk.to_vec());
            let tally_ref = &tally;
            let in_flight = if pass == 1 { threads } else { 1 };
            tokio::task::block_in_place(|| {
                run_cases(port, pid, seed, &chunk_vec, in_flight, tally_ref)
            });
            done += chunk.len();
            max_fds = max_fds.max(s.open_fds());
            assert_serving(&mut s, seed, done, &tally).await;
            println!(
                "protocol fuzz: pass {pass}, {done} cases, {} fds, RSS {} MiB",
                s.open_fds(),
                rss_kib(pid) / 1024
            );
        }
        let rss_limit = match pass {
            1 => rss_before + RSS_SLACK_KIB,
            _ => rss_after[0] + REPLAY_RSS_SLACK_KIB,
        };
        let (fds, rss) = settle(&s, pid, fds_before + FD_SLACK, rss_limit).await;
        rss_after.push(rss);
        let t = tally.lock().unwrap();
        println!(
            "protocol fuzz: pass {pass}: {} cases in {:.1?}; fds {fds_before} before, {max_fds} at \
             most, {fds} after; RSS {} MiB before, {} MiB after",
            indices.len(),
            pass_started.elapsed(),
            rss_before / 1024,
            rss / 1024
        );
        assert!(
            t.connect_failures.is_empty(),
            "protocol fuzz, seed {seed:#x}: {} connect(s) refused, e.g. {}",
            t.connect_failures.len(),
            t.connect_failures[0]
        );
        assert!(
            fds <= fds_before + FD_SLACK,
            "protocol fuzz, seed {seed:#x}: descriptors leaked: {fds} open 10 s after pass {pass}, \
             {fds_before} before the fuzz (cases that held their connection open: {:#?})",
            t.held_open
        );
        assert!(
            rss <= rss_limit,
            "protocol fuzz, seed {seed:#x}: RSS {} MiB after pass {pass}: more than the bound of \
             {} MiB (baseline {} MiB{})",
            rss / 1024,
            rss_limit / 1024,
            rss_before / 1024,
            match pass {
                1 => String::new(),
                _ => format!(", {} MiB after pass 1", rss_after[0] / 1024),
            }
        );
    }
    {
        let t = tally.lock().unwrap();
        println!(
            "protocol fuzz: {done} cases in {:.1?}; families {:?}; outcomes {:?}; slowest {:?}",
            started.elapsed(),
            t.families,
            t.outcomes,
            t.slowest
        );
        println!(
            "protocol fuzz: {} case(s) stopped waiting for an answer after {READY_IDLE:?} of quiet",
            QUIET.load(Ordering::Relaxed)
        );
        for h in &t.held_open {
            println!("protocol fuzz: held open: {h}");
        }
    }
    assert_serving(&mut s, seed, done, &tally).await;
}

/// Poll (up to 10 s) until the server holds at most `max_fds` descriptors
/// and `max_rss` KiB; the last figures either way.
async fn settle(s: &Server, pid: u32, max_fds: usize, max_rss: u64) -> (usize, u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (fds, rss) = (s.open_fds(), rss_kib(pid));
        if (fds <= max_fds && rss <= max_rss) || Instant::now() > deadline {
            return (fds, rss);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Found by the fuzz above. pgwire 0.41.1 handed each message's decoder
/// the whole connection buffer, not the message's `length` bytes, so a
/// body shorter than its own counts was completed with the bytes of the
/// messages after it: a Parse of "SELECT 1" declaring one parameter type
/// and carrying none, then Sync, took the Sync's bytes as the type and the
/// client never got ReadyForQuery; declaring three and carrying one
/// panicked in the decoder. Fixed in the vendored pgwire
/// (vendor/pgwire/FRESHET-PATCH.md): each is a FATAL 08P01 for that
/// connection, and the server goes on.
/// (PostgreSQL answers with an ERROR and keeps the session; pgwire's
/// message stream ends at a decode error.)
#[tokio::test(flavor = "multi_thread")]
async fn a_message_shorter_than_its_counts_is_08p01() {
    let s = Server::start();
    for declared in [1u8, 3] {
        let mut body = b"\0SELECT 1\0\x00".to_vec();
        body.push(declared);
        if declared == 3 {
            body.extend_from_slice(&23u32.to_be_bytes());
        }
        let mut sock = crate::bad_input::raw_connect(&s);
        let _ = sock.set_read_timeout(Some(SOCKET_TIMEOUT));
        sock.write_all(&[message(b'P', &body), sync_msg()].concat())
            .unwrap();
        let seen = read_messages(&mut sock);
        let kinds: Vec<char> = seen.iter().map(|(k, _)| *k as char).collect();
        let fields = seen.iter().find(|(k, _)| *k == b'E').map(|(_, body)| {
            body.split(|b| *b == 0)
                .filter_map(|f| Some((*f.first()?, String::from_utf8_lossy(&f[1..]).into_owned())))
                .collect::<Vec<_>>()
        });
        let field = |code: u8| {
            fields
                .as_ref()
                .and_then(|f| f.iter().find(|(c, _)| *c == code).map(|(_, v)| v.clone()))
        };
        assert_eq!(
            (field(b'C').as_deref(), field(b'S').as_deref()),
            (Some("08P01"), Some("FATAL")),
            "{declared} type(s) declared: {kinds:?}"
        );
        // pgwire's wording ("... bytes required, 0 remaining") or ours.
        assert!(
            field(b'M').is_some_and(|m| m.contains("insufficient data") || m.contains("remaining")),
            "{fields:?}"
        );
        // Not a panic: the decoder failed, and said so.
        assert!(!kinds.contains(&'1'), "no ParseComplete: {kinds:?}");
        // The server goes on.
        let c = s.connect().await;
        assert_eq!(value(&c, "SELECT 1").await.as_deref(), Some("1"));
    }
}
