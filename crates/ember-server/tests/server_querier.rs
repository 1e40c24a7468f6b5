//! `querier.v1.QuerierService` Connect methods (what Grafana's Pyroscope data source calls) and
//! `/pyroscope/render-diff`, against the server run in-process.

mod util;

use ember_proto::querier::{FlameGraphResponse, SelectRequest};
use prost::Message;
use util::{Server, corpus, enc, push_request, temp_dir};

const CPU: &str = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";

fn post_json(server: &Server, method: &str, body: serde_json::Value) -> serde_json::Value {
    let (s, b) = server.request(
        "POST",
        &format!("/querier.v1.QuerierService/{method}"),
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    );
    assert_eq!(s, 200, "{method}: {}", String::from_utf8_lossy(&b));
    serde_json::from_slice(&b).unwrap()
}

fn cpu_total(bytes: &[u8]) -> i64 {
    let p = ember_pprof::decode(bytes).unwrap();
    let i = ember_pprof::sample_index(&p, Some("cpu")).unwrap();
    p.sample.iter().map(|s| s.value[i]).sum()
}

#[test]
fn querier_connect_methods() {
    let dir = temp_dir("querier");
    let dir = dir.path();
    let server = Server::start(dir, &[]);
    let a = std::fs::read(corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz")).unwrap();
    let b = std::fs::read(corpus("pprof/internal/report/testdata/sample.cpu")).unwrap();
    for (pod, bytes) in [("pod-a", &a), ("pod-b", &b)] {
        let req = push_request(
            &[
                ("__name__", "process_cpu"),
                ("service_name", "api"),
                ("pod", pod),
            ],
            bytes,
        );
        let (s, body) = server.push(&req);
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
    }

    let types = post_json(&server, "ProfileTypes", serde_json::json!({}));
    let ids: Vec<&str> = types["profileTypes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["ID"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&CPU), "{types}");
    let names = post_json(
        &server,
        "LabelNames",
        serde_json::json!({"matchers": ["{service_name=\"api\"}"]}),
    );
    assert!(
        names["names"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "pod"),
        "{names}"
    );
    let values = post_json(
        &server,
        "LabelValues",
        serde_json::json!({"name": "pod", "matchers": ["{service_name=\"api\"}"]}),
    );
    assert_eq!(values["names"], serde_json::json!(["pod-a", "pod-b"]));
    let series = post_json(
        &server,
        "Series",
        serde_json::json!({"matchers": [format!("{{__profile_type__=\"{CPU}\"}}")], "labelNames": ["pod", "service_name"]}),
    );
    assert_eq!(series["labelsSet"].as_array().unwrap().len(), 2, "{series}");

    // SelectMergeStacktraces over protobuf: totals per selector.
    let select = |selector: &str| -> i64 {
        let req = SelectRequest {
            profile_type_id: CPU.into(),
            label_selector: selector.into(),
            start: 0,
            end: 0,
            max_nodes: Some(100),
        };
        let (s, body) = server.request(
            "POST",
            "/querier.v1.QuerierService/SelectMergeStacktraces",
            &[("Content-Type", "application/proto")],
            &req.encode_to_vec(),
        );
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
        let fg = FlameGraphResponse::decode(&body[..])
            .unwrap()
            .flamegraph
            .unwrap();
        assert!(fg.names.len() <= 102);
        fg.total
    };
    assert_eq!(
        select("{service_name=\"api\", pod=\"pod-a\"}"),
        cpu_total(&a)
    );
    assert_eq!(
        select("{service_name=\"api\"}"),
        cpu_total(&a) + cpu_total(&b)
    );
    assert_eq!(
        select("{service_name=\"api\", pod=~\"pod-[bc]\"}"),
        cpu_total(&b)
    );

    // SelectMergeProfile returns a pprof profile.
    let req = SelectRequest {
        profile_type_id: CPU.into(),
        label_selector: "{service_name=\"api\"}".into(),
        start: 0,
        end: 0,
        max_nodes: None,
    };
    let (s, body) = server.request(
        "POST",
        "/querier.v1.QuerierService/SelectMergeProfile",
        &[("Content-Type", "application/proto")],
        &req.encode_to_vec(),
    );
    assert_eq!(s, 200);
    let p = ember_pprof::decode(&body).expect("SelectMergeProfile returns valid pprof");
    assert_eq!(
        p.sample.iter().map(|s| s.value[0]).sum::<i64>(),
        cpu_total(&a) + cpu_total(&b)
    );

    // SelectSeries grouped by pod.
    let ts = post_json(
        &server,
        "SelectSeries",
        serde_json::json!({"profileTypeID": CPU, "labelSelector": "{service_name=\"api\"}", "start": "0", "end": "0", "step": 60, "groupBy": ["pod"]}),
    );
    let series = ts["series"].as_array().unwrap();
    assert_eq!(series.len(), 2, "{ts}");
    let pod_a: f64 = series[0]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["value"].as_f64().unwrap())
        .sum();
    assert_eq!(series[0]["labels"][0]["value"], "pod-a");
    assert_eq!(pod_a as i64, cpu_total(&a));

    // Diff of the two pods.
    let diff = post_json(
        &server,
        "Diff",
        serde_json::json!({
            "left": {"profileTypeID": CPU, "labelSelector": "{pod=\"pod-a\"}"},
            "right": {"profileTypeID": CPU, "labelSelector": "{pod=\"pod-b\"}"},
        }),
    );
    assert_eq!(
        diff["flamegraph"]["leftTicks"].as_i64().unwrap(),
        cpu_total(&a)
    );
    assert_eq!(
        diff["flamegraph"]["rightTicks"].as_i64().unwrap(),
        cpu_total(&b)
    );
    let level0 = diff["flamegraph"]["levels"][0]["values"]
        .as_array()
        .unwrap();
    assert_eq!(level0.len(), 7);

    // /pyroscope/render-diff.
    let q = |pod: &str| enc(&format!("{CPU}{{pod=\"{pod}\"}}"));
    let rd = server.get_json(&format!("/pyroscope/render-diff?leftQuery={}&leftFrom=0&leftUntil=now&rightQuery={}&rightFrom=0&rightUntil=now", q("pod-a"), q("pod-b")), &[]);
    assert_eq!(rd["metadata"]["format"], "double");
    assert_eq!(rd["leftTicks"].as_i64().unwrap(), cpu_total(&a));
    assert_eq!(rd["rightTicks"].as_i64().unwrap(), cpu_total(&b));

    // Unknown method: Connect-style error.
    let (s, _) = server.request(
        "POST",
        "/querier.v1.QuerierService/Nope",
        &[("Content-Type", "application/json")],
        b"{}",
    );
    assert_eq!(s, 404);
    drop(server);
}

/// Grafana's "profiles for this span": `SelectMergeSpanProfile` (protobuf and JSON) and the
/// render API's `spanSelector` merge only the samples whose pprof `span_id` label is listed,
/// and a label selector on a sample label selects samples the same way.
#[test]
fn span_profiles_select_the_samples_of_a_span() {
    use ember_proto::querier::SelectMergeSpanProfileRequest;
    let dir = temp_dir("spans");
    let dir = dir.path();
    let server = Server::start(dir, &[]);
    // otel-profiling-go output: 1.32 s of CPU, 710 ms of it in span 239.
    let bytes = std::fs::read(corpus(
        "pyroscope/pkg/pprof/testdata/single_group_with_optional_span_id.pb.gz",
    ))
    .unwrap();
    let req = push_request(
        &[("__name__", "process_cpu"), ("service_name", "traced")],
        &bytes,
    );
    let (s, body) = server.push(&req);
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
    let span = |ids: &[&str]| -> i64 {
        let req = SelectMergeSpanProfileRequest {
            profile_type_id: CPU.into(),
            label_selector: "{service_name=\"traced\"}".into(),
            span_selector: ids.iter().map(|s| s.to_string()).collect(),
            start: 0,
            end: 0,
            max_nodes: None,
        };
        let (s, body) = server.request(
            "POST",
            "/querier.v1.QuerierService/SelectMergeSpanProfile",
            &[("Content-Type", "application/proto")],
            &req.encode_to_vec(),
        );
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
        FlameGraphResponse::decode(&body[..])
            .unwrap()
            .flamegraph
            .unwrap()
            .total
    };
    assert_eq!(span(&["239"]), 710_000_000);
    assert_eq!(span(&["0000000000000001", "239"]), 710_000_000);
    assert_eq!(span(&["0000000000000001"]), 0);
    let json = post_json(
        &server,
        "SelectMergeSpanProfile",
        serde_json::json!({"profileTypeID": CPU, "labelSelector": "{service_name=\"traced\"}", "spanSelector": ["239"]}),
    );
    assert_eq!(
        json["flamegraph"]["total"].as_i64(),
        Some(710_000_000),
        "{json}"
    );
    let render = |query: &str, extra: &str| -> i64 {
        let v = server.get_json(
            &format!(
                "/pyroscope/render?query={}&from=0&until=now&format=json{extra}",
                enc(query)
            ),
            &[],
        );
        v["flamebearer"]["numTicks"].as_i64().unwrap()
    };
    let sel = format!("{CPU}{{service_name=\"traced\"}}");
    assert_eq!(render(&sel, ""), 1_320_000_000);
    assert_eq!(render(&sel, "&spanSelector=239"), 710_000_000);
    // A sample label in the selector itself selects samples too.
    assert_eq!(
        render(
            &format!("{CPU}{{service_name=\"traced\", span_id=\"239\"}}"),
            ""
        ),
        710_000_000
    );
    assert_eq!(
        render(
            &format!("{CPU}{{service_name=\"traced\", span_id!=\"239\"}}"),
            ""
        ),
        610_000_000
    );
    drop(server);
}
