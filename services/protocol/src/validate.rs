//! Field validation after parsing: lengths, name shapes, required combinations.
//!
//! Names (display names, circles, recipients) are 1–64 bytes of `[A-Za-z0-9._-]`; this keeps
//! them safe to show in a terminal and unambiguous to type. Texts may hold any Unicode; the
//! client sanitises before anything reaches a terminal.

use crate::codec::DecodeError;
use crate::codes::ErrorCode;
use crate::conversation::*;
use crate::frame::*;
use crate::limits::*;
use crate::question::*;
use crate::session::*;

type Result<T = ()> = std::result::Result<T, DecodeError>;

fn invalid(message: impl Into<String>) -> DecodeError {
    DecodeError::new(ErrorCode::InvalidFrame, message)
}

/// True for a valid display name, circle or recipient name.
pub fn is_valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_BYTES
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// True for a character that changes how the text around it is shown without showing itself:
/// bidirectional controls (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069) and invisible
/// or zero-width ones (U+00AD, U+180E, U+200B–U+200D, U+2060–U+2064, U+FEFF, U+FFF9–U+FFFB). In
/// a text a person reads as an identity (a display name, a label, a description) they let
/// `"\u{202e}gnp.exe"` read as `exe.png` or `"adm\u{200b}in"` pass for `admin`.
pub fn is_deceptive(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{061c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
    )
}

/// Refuses control characters and [`is_deceptive`] ones in a text a person reads as an identity.
fn plain(field: &str, value: &str) -> Result {
    if value.chars().any(|c| c.is_control() || is_deceptive(c)) {
        return Err(invalid(format!(
            "`{field}` must not contain control characters, bidirectional controls or invisible \
             characters"
        )));
    }
    Ok(())
}

fn name(field: &str, value: &str) -> Result {
    if is_valid_name(value) {
        Ok(())
    } else {
        Err(invalid(format!(
            "`{field}` must be 1-{MAX_NAME_BYTES} characters of letters, digits, '.', '_' or '-'"
        )))
    }
}

fn opt_name(field: &str, value: &Option<String>) -> Result {
    value.as_deref().map_or(Ok(()), |v| name(field, v))
}

fn bounded(field: &str, value: &str, max: usize) -> Result {
    if value.len() > max {
        Err(invalid(format!(
            "`{field}` is {} bytes; the limit is {max}",
            value.len()
        )))
    } else {
        Ok(())
    }
}

fn text(field: &str, value: &str, allow_empty: bool) -> Result {
    if value.len() > MAX_TEXT_BYTES {
        return Err(DecodeError::new(
            ErrorCode::TextTooLarge,
            format!(
                "`{field}` is {} bytes; the limit is {MAX_TEXT_BYTES}",
                value.len()
            ),
        ));
    }
    if !allow_empty && value.trim().is_empty() {
        return Err(invalid(format!("`{field}` must not be empty")));
    }
    Ok(())
}

fn conversation_id(value: &str) -> Result {
    if looks_like_conversation_id(value) {
        Ok(())
    } else {
        Err(invalid(
            "`conversation_id` is `cv-` and 16 characters, as the relay minted it",
        ))
    }
}

fn question(q: &Question) -> Result {
    if q.options.len() > MAX_QUESTION_OPTIONS {
        return Err(invalid(format!(
            "a question has at most {MAX_QUESTION_OPTIONS} options"
        )));
    }
    for o in &q.options {
        name("question.options[].id", &o.id)?;
        bounded("question.options[].label", &o.label, MAX_DESCRIPTION_BYTES)?;
    }
    let ids: std::collections::HashSet<_> = q.options.iter().map(|o| &o.id).collect();
    if ids.len() != q.options.len() {
        return Err(invalid("question option ids must be distinct"));
    }
    match q.kind {
        QuestionKind::Choice if q.options.len() < 2 => {
            return Err(invalid("a choice question needs at least two options"));
        }
        QuestionKind::Text | QuestionKind::Acknowledge if !q.options.is_empty() => {
            return Err(invalid(format!(
                "a {} question has no options",
                q.kind.as_str()
            )));
        }
        QuestionKind::ToolPermission
            if !(ids.len() == 2
                && q.options.iter().any(|o| o.id == "allow")
                && q.options.iter().any(|o| o.id == "deny")) =>
        {
            return Err(invalid(
                "a tool_permission question has exactly the options `allow` and `deny`",
            ));
        }
        _ => {}
    }
    if let Some(t) = q.timeout_ms
        && !(MIN_QUESTION_TIMEOUT_MS..=MAX_QUESTION_TIMEOUT_MS).contains(&t)
    {
        return Err(invalid(format!(
            "`question.timeout_ms` must be {MIN_QUESTION_TIMEOUT_MS}-{MAX_QUESTION_TIMEOUT_MS} (1 s to 7 days)"
        )));
    }
    let Some(default) = &q.default else {
        return Ok(());
    };
    if q.timeout_ms.is_none() {
        return Err(invalid(
            "`question.default` is taken at the timeout: give `question.timeout_ms` too",
        ));
    }
    match q.kind {
        QuestionKind::Choice if ids.contains(default) => Ok(()),
        QuestionKind::Choice => Err(invalid(format!(
            "`question.default` `{default}` is not one of the options"
        ))),
        QuestionKind::ToolPermission if default == "deny" => Ok(()),
        QuestionKind::ToolPermission => Err(invalid(
            "a tool_permission question denies when unanswered: its `default` can only be `deny`",
        )),
        QuestionKind::Text | QuestionKind::Acknowledge => Err(invalid(format!(
            "a {} question has no option to take by default",
            q.kind.as_str()
        ))),
    }
}

/// Validates a decoded frame.
/// True for a W3C `traceparent` of version `00`: `00-<32 hex>-<16 hex>-<2 hex>`, lowercase,
/// with a trace id and a parent id that are not all zeros.
pub fn is_valid_traceparent(s: &str) -> bool {
    let hex = |p: &str, len: usize| {
        p.len() == len && p.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let parts: Vec<&str> = s.split('-').collect();
    matches!(parts.as_slice(), [version, trace, parent, flags]
        if *version == "00"
            && hex(trace, 32)
            && hex(parent, 16)
            && hex(flags, 2)
            && trace.bytes().any(|b| b != b'0')
            && parent.bytes().any(|b| b != b'0'))
}

pub(crate) fn frame(frame: &Frame) -> Result {
    if let Some(tp) = &frame.traceparent
        && !is_valid_traceparent(tp)
    {
        return Err(invalid(
            "`traceparent` must be a W3C trace context: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, lowercase, ids not all zero",
        ));
    }
    body(frame)
}

fn body(frame: &Frame) -> Result {
    match &frame.body {
        Body::Hello(h) => bounded("client", &h.client, MAX_SHORT_BYTES),
        Body::Register(r) => {
            opt_name("name", &r.name)?;
            opt_name("circle", &r.circle)?;
            if r.backend.is_empty()
                || r.backend.len() > MAX_SHORT_BYTES
                || !r
                    .backend
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(invalid(
                    "`backend` must be 1-64 characters of letters, digits, '-' or '_'",
                ));
            }
            if let Some(p) = &r.path {
                bounded("path", p, MAX_PATH_BYTES)?;
                if p.chars().any(char::is_control) {
                    return Err(invalid("`path` must not contain control characters"));
                }
            }
            if let Some(m) = &r.machine {
                bounded("machine", m, MAX_SHORT_BYTES)?;
                plain("machine", m)?;
            }
            Ok(())
        }
        Body::UpdatePeer(u) => {
            if let Some(d) = &u.description {
                bounded("description", d, MAX_DESCRIPTION_BYTES)?;
                // Line breaks and tabs stay allowed (task notes); clients sanitise controls
                // before a terminal. What hides or reorders text is refused.
                if d.chars().any(is_deceptive) {
                    return Err(invalid(
                        "`description` must not contain bidirectional controls or invisible characters",
                    ));
                }
            }
            Ok(())
        }
        Body::ListPeers(l) => {
            opt_name("circle", &l.circle)?;
            if l.limit
                .is_some_and(|n| n == 0 || n > crate::limits::MAX_PEERS_PAGE)
            {
                return Err(invalid(format!(
                    "`limit` must be 1-{}",
                    crate::limits::MAX_PEERS_PAGE
                )));
            }
            if let Some(c) = &l.cursor {
                bounded("cursor", c, crate::limits::MAX_CURSOR_BYTES)?;
            }
            Ok(())
        }
        Body::Ask(a) => {
            if a.to == APPROVERS {
                if a.question.as_ref().map(|q| q.kind) != Some(QuestionKind::ToolPermission) {
                    return Err(invalid(format!(
                        "an ask to `{APPROVERS}` carries a `tool_permission` question (approvers allow or deny tool calls)"
                    )));
                }
                if a.circle.is_some() {
                    return Err(invalid(format!(
                        "`{APPROVERS}` are the tenant's approvers in every circle: `circle` does not apply"
                    )));
                }
            } else {
                name("to", &a.to)?;
            }
            opt_name("circle", &a.circle)?;
            text("text", &a.text, false)?;
            a.question.as_ref().map_or(Ok(()), question)
        }
        Body::Notify(n) => {
            name("to", &n.to)?;
            opt_name("circle", &n.circle)?;
            text("text", &n.text, false)
        }
        Body::Broadcast(b) => text("text", &b.text, false),
        Body::Converse(c) => {
            let most = MAX_CONVERSATION_PARTICIPANTS - 1;
            if c.to.is_empty() || c.to.len() > most {
                return Err(invalid(format!(
                    "`to` names 1-{most} other participants (a conversation has at most {MAX_CONVERSATION_PARTICIPANTS})"
                )));
            }
            for to in &c.to {
                name("to[]", to)?;
            }
            let distinct: std::collections::HashSet<_> = c.to.iter().collect();
            if distinct.len() != c.to.len() {
                return Err(invalid("`to` names each participant once"));
            }
            opt_name("circle", &c.circle)?;
            text("text", &c.text, false)
        }
        Body::Turn(t) => {
            conversation_id(&t.conversation_id)?;
            text("text", &t.text, false)
        }
        Body::EndConversation(e) => {
            conversation_id(&e.conversation_id)?;
            match &e.reason {
                Some(r) => {
                    bounded("reason", r, MAX_REASON_BYTES)?;
                    plain("reason", r)
                }
                None => Ok(()),
            }
        }
        Body::Ack(a) => a
            .reply
            .as_deref()
            .map_or(Ok(()), |r| text("reply", r, false)),
        Body::Answer(a) => {
            if a.option_id.is_none() && a.text.is_none() {
                return Err(invalid("an answer needs `option_id` or `text`"));
            }
            opt_name("option_id", &a.option_id)?;
            a.text.as_deref().map_or(Ok(()), |t| text("text", t, true))
        }
        Body::Receipt(r) => {
            if let Some(reason) = &r.reason {
                bounded("reason", reason, MAX_REASON_BYTES)?;
            }
            if r.state == ReceiptState::Failed && r.reason.is_none() {
                return Err(invalid("a `failed` receipt needs a `reason`"));
            }
            Ok(())
        }
        Body::StateSet(st) => {
            name("key", &st.key)?;
            match &st.value {
                Some(v) if v.len() > MAX_STATE_VALUE_BYTES => Err(DecodeError::new(
                    ErrorCode::TextTooLarge,
                    format!(
                        "`value` is {} bytes; the limit is {MAX_STATE_VALUE_BYTES}",
                        v.len()
                    ),
                )),
                _ => Ok(()),
            }
        }
        Body::StateGet(g) => opt_name("key", &g.key),
        Body::BindSession(b) => {
            if let Some(id) = &b.session_id
                && !looks_like_session_id(id)
            {
                return Err(invalid(
                    "`session_id` is a Repowire session id: `rs-` and 16 of 0-9 a-z without i, l, o, u",
                ));
            }
            if !is_runtime_session_id(&b.runtime_session_id) {
                return Err(invalid(format!(
                    "`runtime_session_id` must be 1-{MAX_RUNTIME_SESSION_ID_BYTES} characters of letters, digits, '.', '_', ':' or '-', starting with a letter or digit"
                )));
            }
            if let Some(t) = &b.transcript {
                bounded("transcript.path", &t.path, MAX_PATH_BYTES)?;
                if t.path.is_empty() || t.path.chars().any(char::is_control) {
                    return Err(invalid(
                        "`transcript.path` must be a non-empty path without control characters",
                    ));
                }
            }
            opt_name("source", &b.source)
        }
        Body::ListQuestions(l) => match l.limit {
            Some(n) if n == 0 || n > MAX_QUESTIONS_LISTED => {
                Err(invalid(format!("`limit` must be 1-{MAX_QUESTIONS_LISTED}")))
            }
            _ => Ok(()),
        },
        Body::StatusQuery(q) => {
            if q.message_id.is_some() == q.correlation_id.is_some() {
                return Err(invalid(
                    "give exactly one of `message_id` and `correlation_id`",
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_texts_refuse_bidi_controls_and_invisible_characters() {
        for bad in [
            "\u{202e}gnp.exe",
            "adm\u{200b}in",
            "x\u{2066}y",
            "\u{feff}a",
            "a\nb",
        ] {
            assert!(plain("description", bad).is_err(), "{bad:?}");
        }
        for good in ["reviewing PR #12 — café ✓", "日本語の説明", "emoji 🚀"] {
            assert!(plain("description", good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn names_allow_the_documented_alphabet_only() {
        assert!(is_valid_name("api-server_2.x"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("has space"));
        assert!(!is_valid_name("esc\u{1b}[2J"));
        assert!(!is_valid_name(&"a".repeat(MAX_NAME_BYTES + 1)));
    }
}
