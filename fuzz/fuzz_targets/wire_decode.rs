//! The pgwire frontend-message decoder, fed what a hostile client could
//! send, in each state a connection can be in.
//!
//! What Freshet guarantees at this boundary is that no byte sequence takes
//! the process down or puts a connection out of step: the decoder accepts
//! a message or rejects it with an error (08P01), and never panics (the
//! vendored pgwire decodes each message from its own bytes with checked
//! reads, vendor/pgwire/FRESHET-PATCH.md), aborts on an allocation sized
//! by the input, overflows the stack or loops forever. libFuzzer reports
//! any of those as a crash.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use pgwire::messages::{DecodeContext, PgWireFrontendMessage, ProtocolVersion};

fuzz_target!(
    |data: &[u8]| {
        let Some((&state, bytes)) = data.split_first() else {
            return;
        };
        // The high bit picks the protocol version (3.2 has variable-length
        // cancel keys).
        let version = if state & 0x80 == 0 {
            ProtocolVersion::PROTOCOL3_0
        } else {
            ProtocolVersion::PROTOCOL3_2
        };
        let mut ctx = DecodeContext::new(version);
        match (state & 0x7f) % 3 {
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
            match PgWireFrontendMessage::decode(&mut buf, &ctx) {
                Ok(Some(PgWireFrontendMessage::SslNegotiation(_))) => {
                    ctx.awaiting_frontend_ssl = false;
                }
                Ok(Some(PgWireFrontendMessage::Startup(_))) => {
                    ctx.awaiting_frontend_startup = false;
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            }
            if (buf.len(), ctx.awaiting_frontend_ssl, ctx.awaiting_frontend_startup) == before {
                // No progress: the codec would wait for more bytes.
                return;
            }
        }
    }
);
