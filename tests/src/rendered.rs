//! What the Helm chart renders, run as the kubelet would run it: `helm template` of
//! charts/repowire, then one container of a rendered Deployment, Job or Pod started with its
//! rendered command, args and environment and nothing else (Secret references resolved from
//! the test's values, `fieldRef`s from the pod name, each volume a fresh directory).
//!
//! Two ways to run it ([`Runner`]):
//! - **host** (default): the binary `cargo test` built, as a process, each volume mount path
//!   mapped to its directory in the environment;
//! - **image** (`REPOWIRE_TEST_IMAGE=localhost/repowire:dev`, which scripts/test sets after
//!   scripts/image built it): the container image under podman, with the rendered user and
//!   group, the fsGroup as an extra group, a read-only root filesystem, the dropped
//!   capabilities and no privilege escalation, each volume mounted at its rendered path, on
//!   the host network (Postgres, Redis and the fake API server are on 127.0.0.1).

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::process::relay_bin;

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// helm, from scripts/check-chart's cache (`REPOWIRE_HELM` overrides).
pub fn helm() -> PathBuf {
    let path = std::env::var_os("REPOWIRE_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/repowire/tools/helm-v4.2.3/helm")
        });
    assert!(
        path.exists(),
        "no helm at {}: run scripts/check-chart --install (scripts/test does)",
        path.display()
    );
    path
}

/// `helm template` of the chart with `args`; every object.
pub fn render(args: &[&str]) -> Vec<Value> {
    let chart = repo().join("charts/repowire");
    let out = std::process::Command::new(helm())
        .args([
            "template",
            "rw",
            chart.to_str().expect("a UTF-8 path"),
            "--namespace",
            "repowire",
        ])
        .args(args)
        .output()
        .expect("helm");
    assert!(
        out.status.success(),
        "helm template failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("helm prints UTF-8");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("yaml"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// The rendered Deployment of a component (`relay`, `operator`).
pub fn deployment<'a>(objects: &'a [Value], component: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| {
            o["kind"] == "Deployment"
                && o["metadata"]["labels"]["app.kubernetes.io/component"] == component
        })
        .unwrap_or_else(|| panic!("no {component} Deployment rendered"))
}

/// Where rendered containers run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    /// As processes of the binaries `cargo test` built.
    Host,
    /// In this container image, under podman.
    Image(String),
}

impl Runner {
    /// `REPOWIRE_TEST_IMAGE` names the image; unset or empty, the host.
    pub fn from_env() -> Self {
        match std::env::var("REPOWIRE_TEST_IMAGE") {
            Ok(image) if !image.is_empty() => Self::Image(image),
            _ => Self::Host,
        }
    }
}

/// podman with the settings this kind of machine needs (docs: runc, cgroupfs).
pub fn podman() -> Command {
    let mut c = Command::new("podman");
    c.args(["--runtime", "runc", "--cgroup-manager", "cgroupfs"]);
    c
}

/// One running container of a rendered pod; stopped (and its container removed) on drop.
pub struct Running {
    /// The process: the binary itself, or the `podman run` attached to the container.
    pub child: Child,
    /// The container's name, when it runs in the image.
    pub container: Option<String>,
    _volumes: Vec<tempfile::TempDir>,
}

impl Running {
    /// Kills it at once, as a node failure or the OOM killer would: `podman kill -s KILL` of
    /// the container, or SIGKILL to the process.
    pub fn kill(&mut self) {
        match &self.container {
            Some(name) => {
                let out = std::process::Command::new("podman")
                    .args(["--runtime", "runc", "--cgroup-manager", "cgroupfs"])
                    .args(["kill", "-s", "KILL", name])
                    .output()
                    .expect("podman kill");
                assert!(
                    out.status.success(),
                    "podman kill: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            None => self.child.start_kill().expect("kill"),
        }
    }

    /// Waits for it to exit.
    pub async fn wait(&mut self) -> ExitStatus {
        self.child.wait().await.expect("wait")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(name) = &self.container {
            let _ = std::process::Command::new("podman")
                .args(["--runtime", "runc", "--cgroup-manager", "cgroupfs"])
                .args(["rm", "-f", "-t", "0", name])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// What one container needs from the cluster besides its spec.
#[derive(Debug, Default)]
pub struct Cluster<'a> {
    /// The cluster's Secrets: (name, key) → value.
    pub secrets: HashMap<(&'a str, &'a str), String>,
    /// Files the kubelet would provide, given to the container as (variable, file on this
    /// machine): in the image the file is mounted read-only and the variable names the mount.
    pub files: Vec<(&'a str, PathBuf)>,
}

/// The pod spec of a Deployment, a Job or a Pod.
pub fn pod_spec(object: &Value) -> &Value {
    if object["kind"] == "Pod" {
        &object["spec"]
    } else {
        &object["spec"]["template"]["spec"]
    }
}

/// Starts the first container of a rendered pod as pod `name`.
pub fn launch(object: &Value, name: &str, cluster: &Cluster, runner: &Runner) -> Running {
    let spec = pod_spec(object);
    let c = &spec["containers"][0];
    let command = strings(&c["command"]);
    assert_eq!(command.len(), 1, "one executable: {command:?}");
    let fs_group = spec["securityContext"]["fsGroup"].as_u64();

    // The kubelet makes each volume; here each is a fresh directory, made as the kubelet makes
    // it: a Secret's holds one file per key (mode 0644 unless rendered otherwise); an
    // emptyDir with an fsGroup belongs to that group, group-writable and setgid.
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    for m in c["volumeMounts"].as_array().into_iter().flatten() {
        let dir = tempfile::tempdir().expect("a volume directory");
        let volume = spec["volumes"]
            .as_array()
            .expect("the pod's volumes")
            .iter()
            .find(|v| v["name"] == m["name"])
            .expect("the mount's volume");
        if let Some(secret) = volume["secret"]["secretName"].as_str() {
            let mode = volume["secret"]["defaultMode"].as_u64().unwrap_or(0o644) as u32;
            for ((s, k), v) in &cluster.secrets {
                if *s == secret {
                    let file = dir.path().join(k);
                    std::fs::write(&file, v).expect("a Secret file");
                    secret_file_as_the_kubelet_makes_it(&file, mode, fs_group);
                }
            }
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        } else {
            make_writable_by_group(dir.path(), fs_group);
        }
        mounts.push((
            m["mountPath"].as_str().expect("a mount path").to_string(),
            dir.path().to_str().expect("a UTF-8 path").to_string(),
            m["readOnly"].as_bool().unwrap_or(false),
        ));
        volumes.push(dir);
    }

    let in_image = matches!(runner, Runner::Image(_));
    let mut env = Vec::new();
    for e in c["env"].as_array().expect("the container's env") {
        let key = e["name"].as_str().expect("an env name").to_string();
        let value = if let Some(v) = e["value"].as_str() {
            let mut v = v.to_string();
            if !in_image {
                for (path, dir, _) in &mounts {
                    if v == *path || v.starts_with(&format!("{path}/")) {
                        v = v.replacen(path.as_str(), dir, 1);
                    }
                }
            }
            v
        } else if let Some(r) = e["valueFrom"].get("secretKeyRef") {
            let (s, k) = (
                r["name"].as_str().expect("a Secret name"),
                r["key"].as_str().expect("a Secret key"),
            );
            cluster
                .secrets
                .get(&(s, k))
                .unwrap_or_else(|| {
                    panic!("the chart reads Secret {s}/{k}, which the values did not name")
                })
                .clone()
        } else {
            match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.name") => name.to_string(),
                Some("metadata.namespace") => "repowire".to_string(),
                other => panic!("unexpected env source {other:?} for {key}"),
            }
        };
        env.push((key, value));
    }

    let (mut cmd, container) = match runner {
        Runner::Host => {
            let bin = relay_bin()
                .parent()
                .expect("the target directory")
                .join(&command[0]);
            let mut cmd = Command::new(&bin);
            cmd.args(strings(&c["args"])).env_clear().envs(env);
            for (var, file) in &cluster.files {
                cmd.env(var, file);
            }
            (cmd, None)
        }
        Runner::Image(image) => {
            let container = format!(
                "rw-test-{name}-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            );
            let mut cmd = podman();
            cmd.args(["run", "--rm", "--name", &container, "--network", "host"]);
            cmd.args(security_flags(spec, c));
            cmd.args(limits());
            for (path, dir, read_only) in &mounts {
                let ro = if *read_only { ":ro" } else { "" };
                cmd.args(["-v", &format!("{dir}:{path}{ro}")]);
            }
            for (var, file) in &cluster.files {
                let inside = format!("/var/run/repowire-test/{var}");
                cmd.args(["-v", &format!("{}:{inside}:ro", file.display())]);
                cmd.args(["-e", &format!("{var}={inside}")]);
            }
            for (k, v) in &env {
                // `-e NAME` takes the value from podman's own environment: Secret values
                // never appear on a command line (`ps`).
                cmd.env(k, v).args(["-e", k]);
            }
            cmd.args(["--entrypoint", &command[0], image]);
            cmd.args(strings(&c["args"]));
            cmd.env_remove("DBUS_SESSION_BUS_ADDRESS");
            (cmd, Some(container))
        }
    };
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", command[0]));
    for out in [
        Box::new(child.stdout.take().expect("piped stdout"))
            as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
        Box::new(child.stderr.take().expect("piped stderr")),
    ] {
        let name = name.to_string();
        tokio::spawn(async move {
            let mut lines = BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[{name}] {line}");
            }
        });
    }
    Running {
        child,
        container,
        _volumes: volumes,
    }
}

/// The rendered pod and container security contexts as podman flags. The chart must render
/// the strict ones (a numeric non-root user, read-only root, every capability dropped, no
/// privilege escalation): asserted here, so a values change that loosens them fails.
fn security_flags(spec: &Value, c: &Value) -> Vec<String> {
    let (pod, ctr) = (&spec["securityContext"], &c["securityContext"]);
    let pick = |field: &str| ctr[field].as_u64().or(pod[field].as_u64());
    let uid = pick("runAsUser").expect("a numeric runAsUser");
    let gid = pick("runAsGroup").unwrap_or(uid);
    assert!(uid != 0, "the container runs as root");
    assert!(
        ctr["runAsNonRoot"]
            .as_bool()
            .or(pod["runAsNonRoot"].as_bool())
            == Some(true),
        "runAsNonRoot is not set"
    );
    assert_eq!(
        ctr["readOnlyRootFilesystem"], true,
        "a writable root filesystem"
    );
    assert_eq!(
        ctr["allowPrivilegeEscalation"], false,
        "privilege escalation allowed"
    );
    let drop = strings(&ctr["capabilities"]["drop"]);
    assert!(
        drop.iter().any(|d| d == "ALL"),
        "capabilities kept: {drop:?}"
    );
    // Nothing writable but the volumes: no tmpfs podman would add on its own.
    let mut flags = vec![
        "--user".to_string(),
        format!("{uid}:{gid}"),
        "--read-only".into(),
        "--read-only-tmpfs=false".into(),
        "--security-opt".into(),
        "no-new-privileges".into(),
    ];
    if let Some(group) = pod["fsGroup"].as_u64() {
        flags.extend(["--group-add".into(), group.to_string()]);
    }
    for cap in drop {
        flags.extend(["--cap-drop".into(), cap]);
    }
    for cap in strings(&ctr["capabilities"]["add"]) {
        flags.extend(["--cap-add".into(), cap]);
    }
    flags
}

/// A Secret volume's file as the kubelet makes it for a pod with an fsGroup: the rendered mode
/// (`defaultMode`), owned by root and the fsGroup, so that a mode such as 0440 lets the pod's
/// group read it and nobody else. Where this test cannot give it to the group (not root), the
/// mode gains read for all, so the container's user can still read it.
fn secret_file_as_the_kubelet_makes_it(file: &std::path::Path, mode: u32, fs_group: Option<u64>) {
    let given = fs_group
        .and_then(|g| std::os::unix::fs::chown(file, Some(0), Some(g as u32)).ok())
        .is_some();
    let mode = if given { mode } else { mode | 0o444 };
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// An emptyDir as the kubelet makes it for a pod with an fsGroup: the group's, with the
/// group's write and setgid (world-writable here when this test does not run as root and
/// cannot give it to the group).
fn make_writable_by_group(dir: &std::path::Path, fs_group: Option<u64>) {
    let given = fs_group
        .and_then(|g| std::os::unix::fs::chown(dir, Some(0), Some(g as u32)).ok())
        .is_some();
    let mode = if given { 0o2775 } else { 0o2777 };
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Resource limits podman must be given explicitly here (the runtime refuses its defaults):
/// open files up to this process's hard limit (at most 65536), processes at 16384.
fn limits() -> Vec<String> {
    let hard = std::process::Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(65536)
        .min(65536);
    vec![
        "--ulimit".into(),
        format!("nofile={hard}:{hard}"),
        "--ulimit".into(),
        "nproc=16384:16384".into(),
    ]
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().expect("a string").to_string())
                .collect()
        })
        .unwrap_or_default()
}
