//! Why a plan could not be written or read in its wire form.

/// A plan that does not survive its wire form.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// An expression has no wire form, so no worker (and no later boot)
    /// could build it: the construct is unsupported in a dataflow.
    #[error("cannot serialize dataflow plan: {0}")]
    Encode(String),
    /// The bytes do not decode.
    #[error("malformed dataflow plan: {0}")]
    Decode(String),
    /// The plan was written in another format (or DataFusion release).
    #[error("dataflow plan format {found} is not {expected}")]
    Format {
        /// The writer's format.
        found: String,
        /// Ours.
        expected: String,
    },
}

/// Results of encoding and decoding plans.
pub type Result<T, E = WireError> = std::result::Result<T, E>;

impl From<datafusion_proto::protobuf::ToProtoError> for WireError {
    fn from(e: datafusion_proto::protobuf::ToProtoError) -> Self {
        WireError::Encode(e.to_string())
    }
}

impl From<datafusion_proto::protobuf::FromProtoError> for WireError {
    fn from(e: datafusion_proto::protobuf::FromProtoError) -> Self {
        WireError::Decode(e.to_string())
    }
}

/// Constant batches travel as Arrow IPC; a batch that does not write or
/// read back is malformed.
impl From<arrow::error::ArrowError> for WireError {
    fn from(e: arrow::error::ArrowError) -> Self {
        WireError::Decode(e.to_string())
    }
}
