//! Answers of the `mutate` and `validate` hooks (ABI §7.3).

use crate::json::quote_into;
use crate::patch::Patch;

/// An admission answer: a decision, and for `mutate` a patch, plus warnings and audit
/// annotations for either hook.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Whether the request is admitted.
    pub allowed: bool,
    /// The HTTP code of a refusal (0: the host's default, 403).
    pub code: i32,
    /// The reason of a refusal ("": the host's default, `Forbidden`).
    pub reason: String,
    /// The message of a refusal, shown to the client.
    pub message: String,
    /// The patch of `object` (`mutate` only; ignored on a refusal).
    pub patch: Patch,
    /// Warnings returned to the client as `Warning` headers.
    pub warnings: Vec<String>,
    /// Audit annotations, recorded as `<plugin>/<key>=<value>`, in order.
    pub audit_annotations: Vec<(String, String)>,
}

impl Answer {
    /// Admits the request unchanged.
    pub fn allow() -> Answer {
        Answer {
            allowed: true,
            code: 0,
            reason: String::new(),
            message: String::new(),
            patch: Patch::new(),
            warnings: Vec::new(),
            audit_annotations: Vec::new(),
        }
    }

    /// Admits the request with a patch.
    pub fn patched(patch: Patch) -> Answer {
        Answer { patch, ..Answer::allow() }
    }

    /// Refuses the request with 403 Forbidden and a message.
    pub fn deny(message: &str) -> Answer {
        Answer::deny_with(403, "Forbidden", message)
    }

    /// Refuses the request with a code, a reason and a message.
    pub fn deny_with(code: i32, reason: &str, message: &str) -> Answer {
        Answer { allowed: false, code, reason: reason.to_string(), message: message.to_string(), ..Answer::allow() }
    }

    /// Adds a warning for the client.
    pub fn warn(&mut self, warning: &str) -> &mut Answer {
        self.warnings.push(warning.to_string());
        self
    }

    /// Adds an audit annotation.
    pub fn audit(&mut self, key: &str, value: &str) -> &mut Answer {
        self.audit_annotations.push((key.to_string(), value.to_string()));
        self
    }

    /// The answer's JSON text; empty members are left out.
    pub fn to_json(&self) -> String {
        let mut out = String::from(if self.allowed { "{\"allowed\":true" } else { "{\"allowed\":false" });
        if !self.allowed {
            if self.code != 0 {
                out.push_str(",\"code\":");
                out.push_str(&self.code.to_string());
            }
            if !self.reason.is_empty() {
                out.push_str(",\"reason\":");
                quote_into(&mut out, &self.reason);
            }
            if !self.message.is_empty() {
                out.push_str(",\"message\":");
                quote_into(&mut out, &self.message);
            }
        } else if !self.patch.is_empty() {
            out.push_str(",\"patch\":");
            out.push_str(&self.patch.to_json());
        }
        if !self.warnings.is_empty() {
            out.push_str(",\"warnings\":[");
            for (i, w) in self.warnings.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                quote_into(&mut out, w);
            }
            out.push(']');
        }
        if !self.audit_annotations.is_empty() {
            out.push_str(",\"auditAnnotations\":{");
            for (i, (k, v)) in self.audit_annotations.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                quote_into(&mut out, k);
                out.push(':');
                quote_into(&mut out, v);
            }
            out.push('}');
        }
        out.push('}');
        out
    }
}
