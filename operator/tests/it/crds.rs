//! The CRDs committed under charts/repowire/crds/ are what `repowire-operator crdgen` prints.

#[test]
fn committed_crds_match_the_types() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../charts/repowire/crds/repowire.io.yaml"
    );
    let generated = repowire_operator::crd::crds_yaml().expect("crds");
    if std::env::var_os("REPOWIRE_BLESS").is_some() {
        std::fs::write(path, &generated).expect("write crds");
    }
    let committed = std::fs::read_to_string(path).expect("read the committed CRDs");
    assert!(
        committed == generated,
        "charts/repowire/crds/repowire.io.yaml is out of date: run \
         `REPOWIRE_BLESS=1 cargo test -p repowire-operator --test crds` and commit it"
    );
}

#[test]
fn crds_carry_status_printer_columns_and_immutability_rules() {
    let yaml = repowire_operator::crd::crds_yaml().expect("crds");
    let docs: Vec<serde_json::Value> = yaml
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_yaml::from_str(d).expect("yaml"))
        .collect();
    assert_eq!(docs.len(), 2);
    for (doc, kind, short) in [
        (&docs[0], "Tenant", "rwtenant"),
        (&docs[1], "ApiKey", "rwkey"),
    ] {
        assert_eq!(doc["spec"]["names"]["kind"], kind);
        assert_eq!(doc["spec"]["group"], "repowire.io");
        assert_eq!(doc["spec"]["scope"], "Namespaced");
        assert_eq!(doc["spec"]["names"]["shortNames"][0], short);
        let version = &doc["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha1");
        assert!(
            version["subresources"]["status"].is_object(),
            "{kind} has a status subresource"
        );
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .expect("columns")
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert!(
            columns.contains(&"Ready") && columns.contains(&"Age"),
            "{kind}: {columns:?}"
        );
    }
    let key_spec =
        &docs[1]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(
        key_spec["properties"]["scopes"]["items"]["enum"],
        serde_json::json!([
            "connect",
            "usage:read",
            "approve",
            "keys:manage",
            "messages:read"
        ])
    );
    assert_eq!(
        key_spec["properties"]["tenantRef"]["x-kubernetes-validations"][0]["rule"],
        "self == oldSelf"
    );
    let tenant_limits = &docs[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        ["spec"]["properties"]["limits"];
    assert_eq!(
        tenant_limits["properties"]["max_message_bytes"]["maximum"].as_f64(),
        Some(32768.0)
    );
}
