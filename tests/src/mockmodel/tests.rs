//! The script, on requests shaped as Claude Code sends them.

#![allow(clippy::unwrap_used)]
use super::*;

fn user(text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}]})
}

fn req(messages: Vec<Value>, tools: &[&str]) -> Value {
    json!({
        "model": "m", "stream": true,
        "system": [{"type": "text", "text": "Primary working directory: /tmp/h/beta\n"}],
        "tools": tools.iter().map(|t| json!({"name": t})).collect::<Vec<_>>(),
        "messages": messages,
    })
}

fn tool(reply: &Reply) -> (&str, &Value) {
    match reply {
        Reply::Tool { name, input, .. } => (name, input),
        Reply::Text(t) => panic!("text {t}"),
        Reply::NotReady => panic!("not ready"),
    }
}

#[test]
fn the_script_asks_acks_and_finishes() {
    let tools = ["mcp__repowire__ask", "mcp__repowire__ack"];
    let (steps, r) = decide(&req(vec![user("BENCH-START beta 2")], &tools));
    assert_eq!(steps, vec![Step::Start]);
    let (name, input) = tool(&r);
    assert_eq!(name, "mcp__repowire__ask");
    assert_eq!(input["peer_name"], "beta");
    assert_eq!(input["query"], "BENCH turn 1/2");

    let context = "Reminder: #ask-old from @task-runner: BENCH turn 9/9\n\
                   --- @alpha → @beta [ask #ask-0a1b-2c] ---\n> BENCH turn 1/2";
    let (steps, r) = decide(&req(vec![user(context)], &tools));
    assert_eq!(steps, vec![Step::AskSeen(1)]);
    let (name, input) = tool(&r);
    assert_eq!(name, "mcp__repowire__ack");
    assert_eq!(input["correlation_id"], "ask-0a1b-2c");
    assert_eq!(input["message"], "BENCH reply 1/2 from beta");

    let (steps, r) = decide(&req(
        vec![user("reply: BENCH reply 1/2 from beta.")],
        &tools,
    ));
    assert_eq!(steps, vec![Step::ReplySeen(1)]);
    assert_eq!(tool(&r).1["query"], "BENCH turn 2/2");
    assert_eq!(tool(&r).1["peer_name"], "beta");

    let (steps, r) = decide(&req(vec![user("BENCH reply 2/2 from beta")], &tools));
    assert_eq!(steps, vec![Step::ReplySeen(2), Step::Finished]);
    assert!(matches!(r, Reply::Text(_)));
}

#[test]
fn a_tool_result_ends_the_turn_and_names_the_turn() {
    let messages = vec![
        user("BENCH-START beta 3"),
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1",
            "name": "mcp__repowire__ask", "input": {"peer_name": "beta", "query": "BENCH turn 2/3"}}]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}),
    ];
    let (steps, r) = decide(&req(messages, &["mcp__repowire__ask"]));
    assert_eq!(steps, vec![Step::AskReturned(2)]);
    assert!(matches!(r, Reply::Text(_)));
}

#[test]
fn a_deferred_tool_is_searched_first_then_called() {
    let not_yet = req(vec![user("BENCH-START beta 1")], &["ToolSearch"]);
    assert!(matches!(decide(&not_yet).1, Reply::NotReady));
    let listed = "BENCH-START beta 1\nDeferred tools: mcp__repowire__ask";
    let (_, r) = decide(&req(vec![user(listed)], &["ToolSearch"]));
    assert_eq!(tool(&r).0, "ToolSearch");
    let messages = vec![
        user("BENCH-START beta 1"),
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": "s1",
            "name": "ToolSearch", "input": {"query": "select:mcp__repowire__ask"}}]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "s1", "content": "found"}]}),
    ];
    let (steps, r) = decide(&req(messages, &["ToolSearch", "mcp__repowire__ask"]));
    assert!(steps.is_empty(), "{steps:?}");
    assert_eq!(tool(&r).0, "mcp__repowire__ask");
}

#[test]
fn text_without_a_rule_is_recorded() {
    let (steps, r) = decide(&req(vec![user("hello")], &[]));
    assert_eq!(steps, vec![Step::Other("hello".into())]);
    assert!(matches!(r, Reply::Text(_)));
}
