//! For the engine's own tests, which write configurations by hand: the engine has no defaults
//! (every parameter of a policy, edge function or loss must be given; docs/engine.md,
//! "Parameters"), so a test states only what it is about and [`filled`] writes the rest, with
//! the values below. They are the controller's schema defaults (spec/policy.py, spec/edge.py,
//! spec/graph.py), stated here for tests only: the engine never reads them, and
//! tests/test_kinds_match.py holds the schema to the engine's parameters.

use serde_json::{json, Map, Value};

/// The values a test leaves out, by kind (`"loss"`: a link's loss block, whose `p_high` is its
/// `p`). `min_q` is Lin and Morris's 2 packets, or 2 `mean_pkt_bytes` with byte thresholds.
fn test_values(kind: &str, given: &Map<String, Value>) -> Value {
    let interval_pool = json!({"interval_us": 400_000, "pool_bytes": 300 * 1024, "in_dscp": 10, "out_dscp": 12});
    match kind {
        "red" | "catnip_red" | "rio" | "red3" => json!({"mean_pkt_bytes": 1000}),
        "fred" | "frio" => {
            let mean = given.get("mean_pkt_bytes").and_then(Value::as_u64).unwrap_or(1000);
            let first = given.get("min_th").or_else(|| given.get("levels").and_then(|l| l.get(0)?.get("min_th")));
            let bytes = first.is_some_and(|t| t.get("bytes").is_some());
            json!({"mean_pkt_bytes": 1000, "min_q": if bytes { json!({"bytes": 2 * mean}) } else { json!(2) }})
        }
        "source_scheduler" => json!({"downgrade_after_us": 200_000}),
        "mark" => json!({"rules": [], "default": null}),
        "police" => json!({"dscp": null, "per": "link"}),
        "shape" => json!({"buffer": null}),
        "token_marker" => interval_pool,
        "tcpf" => {
            let mut v = interval_pool;
            let rest = json!({"tiny_window": 4, "mss_bytes": 1460, "protect_retransmissions": true,
                              "retransmissions_use_tokens": true, "w_gain": 0.125, "e_gain": 0.5,
                              "flow_idle_us": 120_000_000u64});
            v.as_object_mut().unwrap().extend(rest.as_object().unwrap().clone());
            v
        }
        "loss" => json!({"p_high": given.get("p").cloned().unwrap_or(json!(0))}),
        _ => json!({}),
    }
}

/// `object`, a `kind`'s parameters, with those it leaves out written in.
fn fill(kind: &str, object: &mut Map<String, Value>) {
    if let Value::Object(values) = test_values(kind, object) {
        for (k, v) in values {
            object.entry(k).or_insert(v);
        }
    }
}

/// Every policy, edge function (objects with a `kind`) and link `loss` in `value`, filled.
fn fill_all(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if let Some(Value::String(kind)) = object.get("kind").cloned() {
                fill(&kind, object);
            }
            if let Some(Value::Object(loss)) = object.get_mut("loss") {
                fill("loss", loss);
            }
            object.values_mut().for_each(fill_all);
        }
        Value::Array(items) => items.iter_mut().for_each(fill_all),
        _ => {}
    }
}

/// A configuration (or any part of one: a link, a policy, an edge list) with every parameter
/// it leaves out written in. Text that is not JSON comes back as it is, for the parser to refuse.
pub fn filled(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(mut value) => {
            fill_all(&mut value);
            value.to_string()
        }
        Err(_) => text.to_string(),
    }
}

/// One kind's parameters without their `kind` (as a config struct reads them), filled.
pub fn params(kind: &str, text: &str) -> String {
    let mut value: Value = serde_json::from_str(text).expect("a test's parameters are JSON");
    fill(kind, value.as_object_mut().expect("parameters are an object"));
    value.to_string()
}
