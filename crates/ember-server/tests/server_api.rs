//! HTTP API of the server (run in-process on 127.0.0.1:0): legacy ingest (folded and pprof),
//! Connect push (proto and JSON), selectors, render/flamebearer with maxNodes, query formats,
//! tenants, limits and metrics.

mod util;

use util::{Server, base64, corpus, enc, push_request, temp_dir};

fn flamebearer_total(v: &serde_json::Value) -> i64 {
    v["flamebearer"]["numTicks"].as_i64().unwrap()
}

/// Names of all nodes of a flamebearer response.
fn flamebearer_names(v: &serde_json::Value) -> Vec<String> {
    let names: Vec<String> = v["flamebearer"]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    let mut out = Vec::new();
    for level in v["flamebearer"]["levels"].as_array().unwrap() {
        let level: Vec<i64> = level
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect();
        for q in level.chunks(4) {
            out.push(names[q[3] as usize].clone());
        }
    }
    out
}

#[test]
fn ingest_and_query_round_trip() {
    let dir = temp_dir("api");
    let dir = dir.path();
    let server = Server::start(dir, &[]);
    assert_eq!(server.get("/ready", &[]), (200, "ready\n".into()));
    assert_eq!(server.get("/healthz", &[]).0, 200);

    // Legacy folded ingest with tags, two regions.
    let folded = "main;handler;parse 30\nmain;handler;render 50\nmain;gc 20\n";
    for (region, pod) in [("eu-west", "a"), ("us-east", "b")] {
        let name = enc(&format!("web.cpu{{region={region},pod={pod}}}"));
        let (s, b) = server.request(
            "POST",
            &format!(
                "/ingest?name={name}&from=1700000000&until=1700000010&sampleRate=100&spyName=gospy"
            ),
            &[],
            folded.as_bytes(),
        );
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    }
    let range = "from=1699999000&until=1700001000";
    let all = server.get_json(
        &format!("/pyroscope/render?query={}&{range}", enc("web.cpu{}")),
        &[],
    );
    assert_eq!(flamebearer_total(&all), 2 * 100 * 10_000_000);
    assert_eq!(all["metadata"]["units"], "samples");
    let timeline_sum: i64 = all["timeline"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .sum();
    assert_eq!(timeline_sum, flamebearer_total(&all));

    // Selectors: =~, !=, !~ and a profile type id prefix.
    for (sel, expected) in [
        ("{service_name=\"web\", region=~\"eu-.*\"}", 1),
        ("{service_name=\"web\", pod!=\"a\"}", 1),
        ("{service_name=\"web\", region!~\"(eu|us)-.*\"}", 0),
        (
            "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"web\"}",
            2,
        ),
    ] {
        let v = server.get_json(
            &format!("/pyroscope/render?query={}&{range}", enc(sel)),
            &[],
        );
        assert_eq!(flamebearer_total(&v), expected * 100 * 10_000_000, "{sel}");
    }

    // maxNodes keeps the heaviest path and folds only light siblings into "other".
    let v = server.get_json(
        &format!(
            "/pyroscope/render?query={}&{range}&maxNodes=3",
            enc("web.cpu{}")
        ),
        &[],
    );
    let names = flamebearer_names(&v);
    assert!(names.contains(&"render".to_string()), "{names:?}");
    assert!(names.contains(&"other".to_string()), "{names:?}");
    assert!(!names.contains(&"gc".to_string()), "{names:?}");
    assert_eq!(flamebearer_total(&v), 2 * 100 * 10_000_000);

    // Formats.
    let q = format!("query={}&{range}", enc("web.cpu{region=\"eu-west\"}"));
    let (s, text) = server.get(&format!("/api/v1/query?{q}&format=folded"), &[]);
    assert_eq!(s, 200);
    assert_eq!(
        text,
        "main;gc 200000000\nmain;handler;parse 300000000\nmain;handler;render 500000000\n"
    );
    let (s, pprof) = server.request("GET", &format!("/api/v1/query?{q}&format=pprof"), &[], b"");
    assert_eq!(s, 200);
    let p = ember_pprof::decode(&pprof).expect("server pprof decodes");
    let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(total, 1_000_000_000);
    let (s, svg) = server.get(&format!("/api/v1/query?{q}&format=svg"), &[]);
    assert_eq!(s, 200);
    assert!(
        svg.starts_with("<?xml") && svg.contains("render"),
        "{}",
        &svg[..200.min(svg.len())]
    );
    let (s, top) = server.get(&format!("/api/v1/query?{q}&format=top"), &[]);
    assert_eq!(s, 200);
    assert!(top.lines().any(|l| l.ends_with(" render")), "{top}");

    // Pprof via multipart legacy ingest, with sample_type_config.
    let pprof_bytes = std::fs::read(corpus("pprof/internal/report/testdata/sample.cpu")).unwrap();
    let boundary = "XbOuNdArYx";
    let mut body = Vec::new();
    body.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes());
    body.extend_from_slice(&pprof_bytes);
    body.extend_from_slice(format!("\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"sample_type_config\"; filename=\"sample_type_config.json\"\r\n\r\n{{\"samples\":{{\"display-name\":\"cpu_samples\"}}}}\r\n--{boundary}--\r\n").as_bytes());
    let ct = format!("multipart/form-data; boundary={boundary}");
    let (s, b) = server.request(
        "POST",
        "/pyroscope/ingest?name=goapp.cpu&format=pprof&from=1700000000",
        &[("Content-Type", &ct)],
        &body,
    );
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    let types = server.get_json("/api/v1/profile_types", &[]);
    assert!(
        types
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "process_cpu:cpu_samples:count:cpu:nanoseconds"),
        "{types}"
    );
    let decoded = ember_pprof::decode(&pprof_bytes).unwrap();
    let expected: i64 = decoded.sample.iter().map(|s| s.value[1]).sum();
    let v = server.get_json(
        &format!("/pyroscope/render?query={}&{range}", enc("goapp.cpu{}")),
        &[],
    );
    assert_eq!(flamebearer_total(&v), expected);

    // Connect push with a JSON body (base64 raw_profile) and a tenant.
    let go = std::fs::read(corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz")).unwrap();
    let json = format!(
        "{{\"series\":[{{\"labels\":[{{\"name\":\"__name__\",\"value\":\"process_cpu\"}},{{\"name\":\"service_name\",\"value\":\"tenant-app\"}}],\"samples\":[{{\"rawProfile\":\"{}\",\"ID\":\"x\"}}]}}]}}",
        base64(&go)
    );
    let (s, b) = server.request(
        "POST",
        "/push.v1.PusherService/Push",
        &[
            ("Content-Type", "application/json"),
            ("X-Scope-OrgID", "team-a"),
        ],
        json.as_bytes(),
    );
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    assert_eq!(b, b"{}");
    let team_a = [("X-Scope-OrgID", "team-a")];
    let services = server.get_json("/api/v1/label/service_name/values", &team_a);
    assert_eq!(services, serde_json::json!(["tenant-app"]));
    // Tenants are isolated both ways.
    let anon = server.get_json("/api/v1/label/service_name/values", &[]);
    assert!(
        !anon.as_array().unwrap().iter().any(|v| v == "tenant-app"),
        "{anon}"
    );
    let other = server.get_json(
        "/api/v1/label/service_name/values",
        &[("X-Scope-OrgID", "team-b")],
    );
    assert_eq!(other, serde_json::json!([]));
    let series = server.get_json(
        &format!(
            "/api/v1/series?query={}",
            enc("{service_name=\"tenant-app\"}")
        ),
        &team_a,
    );
    assert_eq!(
        series.as_array().unwrap().len(),
        2,
        "one series per sample type: {series}"
    );
    let names = server.get_json("/api/v1/labels", &team_a);
    for reserved in ["__name__", "__profile_type__", "service_name"] {
        assert!(
            names.as_array().unwrap().iter().any(|n| n == reserved),
            "{names}"
        );
    }

    // Bad pprof: 400 naming the problem; nothing stored changes.
    let mut broken = pprof_bytes.clone();
    broken.truncate(broken.len() / 2);
    let (s, b) = server.push(&push_request(&[("service_name", "web")], &broken));
    assert_eq!(s, 400);
    let err: serde_json::Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(err["code"], "invalid_argument");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("series[0].samples[0]"),
        "{err}"
    );
    let again = server.get_json(
        &format!("/pyroscope/render?query={}&{range}", enc("web.cpu{}")),
        &[],
    );
    assert_eq!(flamebearer_total(&again), flamebearer_total(&all));

    let (s, metrics) = server.get("/metrics", &[]);
    assert_eq!(s, 200);
    assert!(
        metrics.contains("ember_ingested_profiles_total 4"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ember_rejected_total{reason=\"bad_profile\"} 1"),
        "{metrics}"
    );
    drop(server);
}

#[test]
fn limits_give_clear_json_errors() {
    let dir = temp_dir("limits");
    let dir = dir.path();
    let config = dir.join("config.json");
    // Retention off: the corpus profiles pushed below carry their own (years old) times.
    std::fs::write(&config, r#"{"retention_days": 0, "max_body_bytes": 100000, "max_decompressed_bytes": 1000000, "max_series_per_tenant": 4, "max_labels_per_series": 5}"#).unwrap();
    let data = dir.join("data");
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let proto = [("Content-Type", "application/proto")];

    // Body over the limit: 413.
    let big = vec![b'a'; 200_000];
    let (s, b) = server.request("POST", "/ingest?name=x.cpu", &[], &big);
    assert_eq!(s, 413, "{}", String::from_utf8_lossy(&b));
    assert!(String::from_utf8_lossy(&b).contains("100000"));

    // Gzip bomb: small on the wire, over the decompressed limit.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, &vec![0u8; 50_000_000]).unwrap();
    let bomb = gz.finish().unwrap();
    assert!(bomb.len() < 100_000);
    let (s, b) = server.request(
        "POST",
        "/push.v1.PusherService/Push",
        &proto,
        &push_request(&[("service_name", "bomb")], &bomb),
    );
    assert_eq!(s, 413, "{}", String::from_utf8_lossy(&b));

    // Too many labels: 400.
    let go = std::fs::read(corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz")).unwrap();
    let many: Vec<(String, String)> = (0..6).map(|i| (format!("l{i}"), "v".to_string())).collect();
    let many_ref: Vec<(&str, &str)> = many.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let (s, b) = server.request(
        "POST",
        "/push.v1.PusherService/Push",
        &proto,
        &push_request(&many_ref, &go),
    );
    assert_eq!(s, 400, "{}", String::from_utf8_lossy(&b));

    // Series per tenant: each push makes 2 series (two sample types); the third push is refused.
    for (i, expected) in [(0, 200), (1, 200), (2, 429)] {
        let pod = format!("pod-{i}");
        let (s, b) = server.request(
            "POST",
            "/push.v1.PusherService/Push",
            &proto,
            &push_request(&[("service_name", "svc"), ("pod", &pod)], &go),
        );
        assert_eq!(s, expected, "push {i}: {}", String::from_utf8_lossy(&b));
        if s == 429 {
            let err: serde_json::Value = serde_json::from_slice(&b).unwrap();
            assert_eq!(err["code"], "resource_exhausted");
        }
    }
    // Another tenant has its own budget.
    let (s, _) = server.request(
        "POST",
        "/push.v1.PusherService/Push",
        &[
            ("Content-Type", "application/proto"),
            ("X-Scope-OrgID", "other"),
        ],
        &push_request(&[("service_name", "svc")], &go),
    );
    assert_eq!(s, 200);
    let (_, metrics) = server.get("/metrics", &[]);
    for reason in [
        "body_too_large",
        "decompressed_too_large",
        "too_many_labels",
        "series_limit",
    ] {
        assert!(
            metrics.contains(&format!("ember_rejected_total{{reason=\"{reason}\"}} 1")),
            "{reason}: {metrics}"
        );
    }
    drop(server);
}

#[test]
fn bearer_token_auth_maps_tokens_to_tenants() {
    let dir = temp_dir("auth");
    let dir = dir.path();
    let tokens = dir.join("tokens");
    std::fs::write(
        &tokens,
        "# token tenant\nsecret-a team-a\nsecret-b team-b\n",
    )
    .unwrap();
    let server = Server::start(
        &dir.join("data"),
        &["--auth-tokens", tokens.to_str().unwrap()],
    );
    let folded = "main;f 1\n";
    let (s, b) = server.request("POST", "/ingest?name=svc.cpu", &[], folded.as_bytes());
    assert_eq!(s, 401, "{}", String::from_utf8_lossy(&b));
    let (s, _) = server.request(
        "POST",
        "/ingest?name=svc.cpu",
        &[("Authorization", "Bearer wrong")],
        folded.as_bytes(),
    );
    assert_eq!(s, 401);
    // The token decides the tenant; X-Scope-OrgID cannot override it.
    let (s, _) = server.request(
        "POST",
        "/ingest?name=svc.cpu",
        &[
            ("Authorization", "Bearer secret-a"),
            ("X-Scope-OrgID", "team-b"),
        ],
        folded.as_bytes(),
    );
    assert_eq!(s, 200);
    let a = server.get_json(
        "/api/v1/label/service_name/values",
        &[("Authorization", "Bearer secret-a")],
    );
    assert_eq!(a, serde_json::json!(["svc"]));
    let b = server.get_json(
        "/api/v1/label/service_name/values",
        &[("Authorization", "Bearer secret-b")],
    );
    assert_eq!(b, serde_json::json!([]));
    assert_eq!(server.get("/api/v1/profile_types", &[]).0, 401);
    assert_eq!(server.get("/ready", &[]).0, 200);
    drop(server);
}

#[test]
fn metrics_auth_puts_metrics_behind_a_token() {
    let dir = temp_dir("metrics-auth");
    let dir = dir.path();
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, "secret-a team-a\n").unwrap();
    let tokens = tokens.to_str().unwrap();
    // Open by default, even with tokens (scrapers without credentials).
    let server = Server::start(&dir.join("open"), &["--auth-tokens", tokens]);
    assert_eq!(server.get("/metrics", &[]).0, 200);
    drop(server);
    let server = Server::start(
        &dir.join("closed"),
        &["--auth-tokens", tokens, "--metrics-auth"],
    );
    let (s, body) = server.get("/metrics", &[]);
    assert_eq!(s, 401, "{body}");
    assert!(body.contains("unauthenticated"), "{body}");
    assert_eq!(
        server
            .get("/metrics", &[("Authorization", "Bearer wrong")])
            .0,
        401
    );
    let (s, body) = server.get("/metrics", &[("Authorization", "Bearer secret-a")]);
    assert_eq!(s, 200);
    assert!(body.contains("ember_connections_open"), "{body}");
    // Health checks stay open.
    assert_eq!(server.get("/ready", &[]).0, 200);
    assert_eq!(server.get("/healthz", &[]).0, 200);
    drop(server);
}

/// Decodes a JSON error body and returns its `code` and `message`.
fn json_error(body: &[u8]) -> (String, String) {
    let v: serde_json::Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("error body is not JSON ({e}): {body:?}"));
    (
        v["code"].as_str().unwrap_or_default().to_string(),
        v["message"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn sample_and_label_length_limits_refuse_without_touching_stored_data() {
    let dir = temp_dir("label-limits");
    let dir = dir.path();
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"retention_days": 0, "max_samples_per_profile": 3, "max_label_name_length": 12, "max_label_value_length": 11}"#,
    )
    .unwrap();
    let server = Server::start(&dir.join("data"), &["--config", config.to_str().unwrap()]);
    let range = "from=1699999000&until=1700001000";
    let stored = || {
        server.get_json(
            &format!("/pyroscope/render?query={}&{range}", enc("keep.cpu{}")),
            &[],
        )
    };
    // Three stacks are within the limit and are stored.
    let (s, b) = server.request(
        "POST",
        "/ingest?name=keep.cpu&from=1700000000&until=1700000010",
        &[],
        b"main;a 1\nmain;b 2\nmain;c 3\n",
    );
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    let before = flamebearer_total(&stored());
    assert_eq!(before, 6 * 10_000_000);

    // A fourth stack in a legacy profile is one too many.
    let (s, b) = server.request(
        "POST",
        "/ingest?name=keep.cpu&from=1700000000&until=1700000010",
        &[],
        b"main;a 1\nmain;b 2\nmain;c 3\nmain;d 4\n",
    );
    assert_eq!(s, 400, "{}", String::from_utf8_lossy(&b));
    let (code, message) = json_error(&b);
    assert_eq!(code, "invalid_argument");
    assert!(message.contains("more than 3 stacks"), "{message}");

    // A pushed pprof with more samples than the limit names the sample and the count.
    let go = std::fs::read(corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz")).unwrap();
    let samples =
        ember_pprof::read_file(&corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz"))
            .unwrap()
            .sample
            .len();
    assert!(samples > 3, "the corpus profile must exceed the limit");
    let (s, b) = server.push(&push_request(&[("service_name", "keep")], &go));
    assert_eq!(s, 400, "{}", String::from_utf8_lossy(&b));
    let (code, message) = json_error(&b);
    assert_eq!(code, "invalid_argument");
    assert!(
        message.contains("series[0].samples[0]")
            && message.contains(&format!("{samples} samples exceed the limit of 3")),
        "{message}"
    );

    // The limits fit `service_name` (12 bytes) and `process_cpu` (11). A label name of 13
    // bytes is refused, through push.
    let mut small = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
    small.add_folded_stack(&["main", "a"], &[5]);
    let small = ember_pprof::encode(&small.build());
    let (s, b) = server.push(&push_request(
        &[("service_name", "keep"), ("thirteen_byte", "v")],
        &small,
    ));
    assert_eq!(s, 400, "{}", String::from_utf8_lossy(&b));
    let (code, message) = json_error(&b);
    assert_eq!(code, "invalid_argument");
    assert!(
        message.contains("label name") && message.contains("longer than 12 bytes"),
        "{message}"
    );
    // A name of exactly 12 bytes and a value of exactly 11 pass.
    let (s, b) = server.request(
        "POST",
        "/push.v1.PusherService/Push",
        &[("Content-Type", "application/proto")],
        &push_request(
            &[("service_name", "keep"), ("twelve_bytes", "eleven_byte")],
            &small,
        ),
    );
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));

    // A label value of 12 bytes (limit 11), through the legacy name's tags.
    let name = enc("keep.cpu{region=twelve_bytes}");
    let (s, b) = server.request(
        "POST",
        &format!("/ingest?name={name}&from=1700000000&until=1700000010"),
        &[],
        b"main;a 1\n",
    );
    assert_eq!(s, 400, "{}", String::from_utf8_lossy(&b));
    let (code, message) = json_error(&b);
    assert_eq!(code, "invalid_argument");
    assert!(
        message.contains("value of label \"region\"") && message.contains("longer than 11 bytes"),
        "{message}"
    );

    // Nothing refused reached the store: the legacy series is unchanged.
    assert_eq!(flamebearer_total(&stored()), before);
    let (_, metrics) = server.get("/metrics", &[]);
    for (reason, n) in [("too_many_samples", 2), ("label_too_long", 2)] {
        assert!(
            metrics.contains(&format!("ember_rejected_total{{reason=\"{reason}\"}} {n}")),
            "{reason}: {metrics}"
        );
    }
    drop(server);
}

/// The value of an unlabelled sample `name` in a Prometheus text exposition.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in {text}"))
}

#[test]
fn legacy_lines_and_units_raw_push_default_tenant_and_flush_metrics() {
    let dir = temp_dir("api-gaps");
    let dir = dir.path();
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"retention_days": 0, "flush_interval_seconds": 1}"#,
    )
    .unwrap();
    let server = Server::start(&dir.join("data"), &["--config", config.to_str().unwrap()]);
    let range = "from=1699999000&until=1700001000";

    // format=lines: one stack per line, each line one sample (10 ms at sampleRate=100).
    let (s, b) = server.request(
        "POST",
        "/ingest?name=lines.cpu&format=lines&from=1700000000&until=1700000010",
        &[],
        b"main;a\nmain;b\nmain;a\n",
    );
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    let (s, text) = server.get(
        &format!(
            "/api/v1/query?query={}&{range}&format=folded",
            enc("lines.cpu{}")
        ),
        &[],
    );
    assert_eq!(s, 200, "{text}");
    assert_eq!(text, "main;a 20000000\nmain;b 10000000\n");

    // units: a non-CPU legacy profile keeps its counts and gets the unit it names.
    let (s, b) = server.request(
        "POST",
        "/ingest?name=heap.inuse_space&units=bytes&from=1700000000&until=1700000010",
        &[],
        b"main;alloc 4096\n",
    );
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    let (s, b) = server.request(
        "POST",
        "/ingest?name=heap.inuse_objects&units=objects&from=1700000000&until=1700000010",
        &[],
        b"main;alloc 7\n",
    );
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    let types = server.get_json("/api/v1/profile_types", &[]);
    for t in ["memory:inuse_space:bytes::", "memory:inuse_objects:count::"] {
        assert!(
            types.as_array().unwrap().iter().any(|x| x == t),
            "{t} missing from {types}"
        );
    }
    let (s, text) = server.get(
        &format!(
            "/api/v1/query?query={}&type={}&{range}&format=folded",
            enc("{service_name=\"heap\"}"),
            enc("memory:inuse_space:bytes::")
        ),
        &[],
    );
    assert_eq!(s, 200, "{text}");
    assert_eq!(text, "main;alloc 4096\n");

    // push.v1 Push with the raw (not gzip'd) pprof stores what the gzip'd one stores;
    // both are pushed without X-Scope-OrgID, so they land in the `anonymous` tenant.
    let gz_path = corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz");
    let gz = std::fs::read(&gz_path).unwrap();
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
    assert_ne!(raw[..2], [0x1f, 0x8b], "the raw body must not be gzip'd");
    for (service, body) in [("raw-svc", &raw), ("gz-svc", &gz)] {
        let (s, b) = server.push(&push_request(&[("service_name", service)], body));
        assert_eq!(s, 200, "{service}: {}", String::from_utf8_lossy(&b));
    }
    let folded = |service: &str, headers: &[(&str, &str)]| {
        let (s, text) = server.get(
            &format!(
                "/api/v1/query?query={}&type={}&from=0&until=4000000000&format=folded",
                enc(&format!("{{service_name=\"{service}\"}}")),
                enc("process_cpu:cpu:nanoseconds:cpu:nanoseconds")
            ),
            headers,
        );
        assert_eq!(s, 200, "{text}");
        text
    };
    let from_raw = folded("raw-svc", &[]);
    assert!(!from_raw.is_empty());
    assert_eq!(from_raw, folded("gz-svc", &[]));
    let expected: i64 = {
        let p = ember_pprof::read_file(&gz_path).unwrap();
        let i = ember_pprof::sample_index(&p, Some("cpu")).unwrap();
        p.sample.iter().map(|s| s.value[i]).sum()
    };
    let total: i64 = from_raw
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<i64>().unwrap())
        .sum();
    assert_eq!(total, expected);

    // The default tenant is `anonymous`: naming it explicitly sees the same data, another
    // tenant sees none of it.
    let anonymous = [("X-Scope-OrgID", "anonymous")];
    assert_eq!(folded("raw-svc", &anonymous), from_raw);
    let services = server.get_json("/api/v1/label/service_name/values", &anonymous);
    for s in ["gz-svc", "heap", "lines", "raw-svc"] {
        assert!(
            services.as_array().unwrap().iter().any(|v| v == s),
            "{s}: {services}"
        );
    }
    let other = server.get_json(
        "/api/v1/label/service_name/values",
        &[("X-Scope-OrgID", "someone-else")],
    );
    assert_eq!(other, serde_json::json!([]));

    // Flush latency: the periodic flush (every second) folds the pushes into a block and
    // its time shows up next to the flush count. The block file appears inside the flush,
    // before the flush is counted and timed (a scrape is no snapshot across metrics), so
    // wait for all three: a block, the startup flush plus the one that wrote it, its time.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let metrics = loop {
        let (s, text) = server.get("/metrics", &[]);
        assert_eq!(s, 200);
        if metric(&text, "ember_blocks") >= 1.0
            && metric(&text, "ember_flushes_total") >= 2.0
            && metric(&text, "ember_flush_seconds_total") > 0.0
        {
            break text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no counted, timed flush into a block within 30 s: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        metrics.contains("# TYPE ember_flush_seconds_total counter"),
        "{metrics}"
    );
    drop(server);
}

#[test]
fn legacy_aggregation_type_average_is_averaged_over_time_and_others_are_refused() {
    let dir = temp_dir("aggregation");
    let dir = dir.path();
    let server = Server::start(dir, &[]);
    // The same two profiles, ten seconds apart, to a summed and to an averaged application.
    for (app, aggregation) in [("summed", "sum"), ("averaged", "average")] {
        for (from, body) in [
            (1_700_000_000, "main;a 10\nmain;b 2\n"),
            (1_700_000_010, "main;a 30\nmain;b 4\n"),
        ] {
            let (s, b) = server.request(
                "POST",
                &format!(
                    "/ingest?name={app}.cpu&aggregationType={aggregation}&from={from}&until={}",
                    from + 10
                ),
                &[],
                body.as_bytes(),
            );
            assert_eq!(s, 200, "{app}: {}", String::from_utf8_lossy(&b));
        }
    }
    let range = "from=1699999000&until=1700001000";
    let folded = |app: &str| {
        let (s, text) = server.get(
            &format!(
                "/api/v1/query?query={}&{range}&format=folded",
                enc(&format!("{app}.cpu{{}}"))
            ),
            &[],
        );
        assert_eq!(s, 200, "{text}");
        text
    };
    // 10 ms per sample at the default sampleRate=100.
    assert_eq!(folded("summed"), "main;a 400000000\nmain;b 60000000\n");
    assert_eq!(folded("averaged"), "main;a 200000000\nmain;b 30000000\n");
    let render = server.get_json(
        &format!("/pyroscope/render?query={}&{range}", enc("averaged.cpu{}")),
        &[],
    );
    assert_eq!(flamebearer_total(&render), 230_000_000);

    // The timeline averages within a bucket too: one bucket holding both profiles, then
    // buckets of 5 s holding one each.
    let points = |app: &str, step: u32| -> Vec<i64> {
        let v = server.get_json(
            &format!(
                "/api/v1/timeseries?query={}&{range}&step={step}",
                enc(&format!("{app}.cpu{{}}"))
            ),
            &[],
        );
        v["series"][0]["points"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|p| p[1].as_i64().unwrap())
            .collect()
    };
    assert_eq!(points("summed", 1000), vec![460_000_000]);
    assert_eq!(points("averaged", 1000), vec![230_000_000]);
    assert_eq!(points("averaged", 5), vec![120_000_000, 340_000_000]);

    // Any other aggregation is a 400 that names the parameter; nothing is stored.
    let (s, b) = server.request(
        "POST",
        "/ingest?name=averaged.cpu&aggregationType=max&from=1700000020",
        &[],
        b"main;a 1000\n",
    );
    assert_eq!(s, 400, "{}", String::from_utf8_lossy(&b));
    let (code, message) = json_error(&b);
    assert_eq!(code, "invalid_argument");
    assert!(message.contains("aggregationType=\"max\""), "{message}");
    assert_eq!(folded("averaged"), "main;a 200000000\nmain;b 30000000\n");

    // The marking survives a restart (it is part of the logged series labels).
    server.terminate();
    let server = Server::start(dir, &[]);
    let (s, text) = server.get(
        &format!(
            "/api/v1/query?query={}&{range}&format=folded",
            enc("averaged.cpu{}")
        ),
        &[],
    );
    assert_eq!(s, 200, "{text}");
    assert_eq!(text, "main;a 200000000\nmain;b 30000000\n");
    drop(server);
}
