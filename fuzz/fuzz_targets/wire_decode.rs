//! The pgwire frontend-message decoder, fed what a hostile client could
//! send, in each state a connection can be in.
//!
//! What Freshet guarantees at this boundary is that no byte sequence takes
//! the process down: the decoder may reject a message or (a pgwire bug,
//! contained by the connection task's `catch_unwind`) panic, but it must
//! never abort (an allocation sized by the input), overflow the stack or
//! loop forever. Panics are therefore caught and counted here; aborts,
//! timeouts and out-of-memory are what libFuzzer reports.
#![no_main]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use pgwire::messages::{DecodeContext, PgWireFrontendMessage, ProtocolVersion};

static CONTAINED_PANICS: AtomicUsize = AtomicUsize::new(0);

fuzz_target!(
    init: {
        // libfuzzer-sys aborts on any panic; a decoder panic is contained
        // in the server, so let `catch_unwind` see it instead.
        std::panic::set_hook(Box::new(|_| {
            CONTAINED_PANICS.fetch_add(1, Ordering::Relaxed);
        }));
    },
    |data: &[u8]| {
        let Some((&state, bytes)) = data.split_first() else {
            return;
        };
        let mut ctx = DecodeContext::new(ProtocolVersion::PROTOCOL3_0);
        match state % 3 {
            0 => {}
            1 => ctx.awaiting_frontend_ssl = false,
            _ => {
                ctx.awaiting_frontend_ssl = false;
                ctx.awaiting_frontend_startup = false;
            }
        }
        let mut buf = BytesMut::from(bytes);
        // Decode messages until the buffer is exhausted or rejected, as a
        // connection's codec would.
        for _ in 0..1024 {
            let before = (buf.len(), ctx.awaiting_frontend_ssl, ctx.awaiting_frontend_startup);
            let decoded = catch_unwind(AssertUnwindSafe(|| {
                PgWireFrontendMessage::decode(&mut buf, &ctx)
            }));
            match decoded {
                Ok(Ok(Some(PgWireFrontendMessage::SslNegotiation(_)))) => {
                    ctx.awaiting_frontend_ssl = false;
                }
                Ok(Ok(Some(PgWireFrontendMessage::Startup(_)))) => {
                    ctx.awaiting_frontend_startup = false;
                }
                Ok(Ok(Some(_))) => {}
                Ok(Ok(None)) | Ok(Err(_)) | Err(_) => return,
            }
            if (buf.len(), ctx.awaiting_frontend_ssl, ctx.awaiting_frontend_startup) == before {
                // No progress: the codec would wait for more bytes.
                return;
            }
        }
    }
);
