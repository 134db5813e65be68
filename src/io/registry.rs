//! What an image is built for, read from its registry before the sitting's Job is made, so
//! that the Job asks for nodes of that architecture (`kubernetes.io/arch`): an image for one
//! architecture on a node of another never pulls, or fails with "exec format error".
//!
//! The OCI distribution API, read only: the manifest `--image` names (an index: its
//! platforms; an image: its config's `os` and `architecture`), with the credentials docker
//! and podman keep for that registry (`auths`, or a credential helper such as gcloud's for
//! Artifact Registry, in `~/.docker/config.json`), or none; a Bearer token fetched when the
//! registry asks for one. Every request has the caller's timeout.

use std::time::Duration;

use base64::Engine;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// An image reference, split as a registry reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// Host and port, as the API is reached (`registry-1.docker.io` for Docker Hub).
    pub registry: String,
    pub repository: String,
    /// A digest (`sha256:...`) or a tag.
    pub reference: String,
    /// Plain HTTP: a registry on this machine (`localhost`, `127.0.0.1`), as docker allows.
    pub plain_http: bool,
}

impl Reference {
    /// Docker's rules: the first part is a registry when it has a `.` or a `:` or is
    /// `localhost`, else Docker Hub (`library/` for a one-part name); `@digest` wins over
    /// `:tag`; no tag is `latest`.
    pub fn parse(image: &str) -> Result<Reference, String> {
        let bad = |why: &str| format!("--image {image:?}: {why}");
        let (name, reference) = match image.split_once('@') {
            Some((n, d)) => (n, d.to_owned()),
            None => match image.rsplit_once(':') {
                Some((n, t)) if !t.contains('/') => (n, t.to_owned()),
                _ => (image, "latest".to_owned()),
            },
        };
        // `name:tag@digest`: the digest names the bytes, the tag is only a label.
        let name = match name.rsplit_once(':') {
            Some((n, t)) if !t.contains('/') && image.contains('@') => n,
            _ => name,
        };
        if name.is_empty() || reference.is_empty() || image.chars().any(char::is_whitespace) {
            return Err(bad("not an image reference"));
        }
        let (registry, repository) = match name.split_once('/') {
            Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
                (first.to_owned(), rest.to_owned())
            }
            Some(_) => ("registry-1.docker.io".to_owned(), name.to_owned()),
            None => ("registry-1.docker.io".to_owned(), format!("library/{name}")),
        };
        let host = registry.rsplit_once(':').map_or(registry.as_str(), |(h, _)| h);
        let plain_http = matches!(host, "localhost" | "127.0.0.1" | "[::1]");
        Ok(Reference { registry, repository, reference, plain_http })
    }

    fn url(&self, path: &str) -> String {
        let scheme = if self.plain_http { "http" } else { "https" };
        format!("{scheme}://{}/v2/{}/{path}", self.registry, self.repository)
    }
}

/// One platform an image is built for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)
    }
}

const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json";

/// The platforms the image is built for: an index's (attestations, `unknown/unknown`, left
/// out), or an image's own from its config.
pub async fn platforms(r: &Reference, t: Duration) -> Result<Vec<Platform>, String> {
    let mut reg = Registry::new(r, t)?;
    let manifest = reg.get_json(&r.url(&format!("manifests/{}", r.reference)), ACCEPT).await?;
    if let Some(list) = manifest["manifests"].as_array() {
        return Ok(list
            .iter()
            .filter_map(|m| platform_of(&m["platform"]))
            .filter(|p| p.os != "unknown")
            .collect());
    }
    let config = manifest["config"]["digest"]
        .as_str()
        .ok_or("the manifest is neither an index nor an image (no config)")?;
    let config = reg.get_json(&r.url(&format!("blobs/{config}")), "*/*").await?;
    Ok(platform_of(&config).into_iter().collect())
}

fn platform_of(v: &Value) -> Option<Platform> {
    Some(Platform {
        os: v["os"].as_str()?.to_owned(),
        architecture: v["architecture"].as_str()?.to_owned(),
    })
}

type Https = hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>;

/// A registry's client: the connection pool, the credentials, and the authorization the
/// registry accepted last.
struct Registry<'a> {
    r: &'a Reference,
    client: Client<Https, Empty<Bytes>>,
    t: Duration,
    credentials: Option<(String, String)>,
    authorization: Option<String>,
}

impl<'a> Registry<'a> {
    fn new(r: &'a Reference, t: Duration) -> Result<Registry<'a>, String> {
        let tls = crate::io::http::tls::tls_config(None, None)?;
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(rustls::ClientConfig::clone(&tls))
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(Registry { r, client, t, credentials: None, authorization: None })
    }

    /// A GET answered 200 as JSON: asked again with credentials or a token when the
    /// registry says 401, a redirect (a blob in a bucket) followed without them.
    async fn get_json(&mut self, url: &str, accept: &str) -> Result<Value, String> {
        let mut url = url.to_owned();
        let mut asked = false;
        for _ in 0..5 {
            let (status, headers, body) = self.get(&url, accept).await?;
            match status {
                200 => {
                    return serde_json::from_slice(&body)
                        .map_err(|e| format!("GET {url}: not JSON: {e}"));
                }
                401 if !asked => {
                    asked = true;
                    let challenge = headers
                        .get(hyper::header::WWW_AUTHENTICATE)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    self.authorize(&challenge).await?;
                }
                301 | 302 | 303 | 307 | 308 => {
                    url = headers
                        .get(hyper::header::LOCATION)
                        .and_then(|v| v.to_str().ok())
                        .ok_or(format!("GET {url}: a redirect without a Location"))?
                        .to_owned();
                    // Another host: the registry's authorization is not for it.
                    self.authorization = None;
                }
                s => {
                    let text = String::from_utf8_lossy(&body);
                    return Err(format!(
                        "GET {url}: HTTP {s}: {}",
                        text.trim().chars().take(200).collect::<String>()
                    ));
                }
            }
        }
        Err(format!("GET {url}: too many redirects"))
    }

    async fn get(&self, url: &str, accept: &str) -> Result<(u16, hyper::HeaderMap, Bytes), String> {
        let mut req = hyper::Request::get(url).header(hyper::header::ACCEPT, accept);
        if let Some(a) = &self.authorization {
            req = req.header(hyper::header::AUTHORIZATION, a);
        }
        let req = req.body(Empty::new()).map_err(|e| format!("GET {url}: {e}"))?;
        let exchange = async {
            let res = self.client.request(req).await.map_err(|e| {
                format!("GET {url}: {}", crate::io::http::exchange::error_chain(&e))
            })?;
            let (parts, body) = res.into_parts();
            let body = body.collect().await.map_err(|e| format!("GET {url}: {e}"))?.to_bytes();
            Ok((parts.status.as_u16(), parts.headers, body))
        };
        tokio::time::timeout(self.t, exchange)
            .await
            .map_err(|_| format!("GET {url}: no answer within {}s", self.t.as_secs()))?
    }

    /// The registry asked for credentials: Basic with the stored ones, or a Bearer token
    /// from its realm (with them, if any: anonymous pulls get one too).
    async fn authorize(&mut self, challenge: &str) -> Result<(), String> {
        if self.credentials.is_none() {
            self.credentials = credentials(&self.r.registry, self.t).await?;
        }
        let basic = self.credentials.as_ref().map(|(u, p)| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        });
        let (scheme, params) = parse_challenge(challenge);
        match scheme.to_ascii_lowercase().as_str() {
            "basic" => {
                self.authorization = Some(basic.ok_or(format!(
                    "{} asks for credentials and none are stored for it (docker login, or gcloud auth configure-docker)",
                    self.r.registry
                ))?);
            }
            "bearer" => {
                let realm = params.iter().find(|(k, _)| k == "realm").map(|(_, v)| v.clone());
                let realm = realm
                    .ok_or(format!("{}: a Bearer challenge without a realm", self.r.registry))?;
                let mut query = vec![format!("scope=repository:{}:pull", self.r.repository)];
                if let Some((_, s)) = params.iter().find(|(k, _)| k == "service") {
                    query.push(format!("service={s}"));
                }
                let url = format!(
                    "{realm}{}{}",
                    if realm.contains('?') { "&" } else { "?" },
                    query.join("&")
                );
                self.authorization = basic;
                let (status, _, body) = self.get(&url, "application/json").await?;
                if status != 200 {
                    return Err(format!(
                        "{}: its token endpoint answered HTTP {status} (credentials: docker login, or gcloud auth configure-docker)",
                        self.r.registry
                    ));
                }
                let v: Value =
                    serde_json::from_slice(&body).map_err(|e| format!("GET {url}: {e}"))?;
                let token = v["token"]
                    .as_str()
                    .or(v["access_token"].as_str())
                    .ok_or(format!("GET {url}: no token"))?;
                self.authorization = Some(format!("Bearer {token}"));
            }
            _ => {
                return Err(format!(
                    "{}: HTTP 401 with a challenge this does not know: {challenge:?}",
                    self.r.registry
                ));
            }
        }
        Ok(())
    }
}

/// `Bearer realm="...",service="..."`: the scheme and its parameters.
fn parse_challenge(c: &str) -> (String, Vec<(String, String)>) {
    let (scheme, rest) = c.trim().split_once(' ').unwrap_or((c.trim(), ""));
    let mut params = Vec::new();
    let mut rest = rest.trim();
    while let Some((k, v)) = rest.split_once('=') {
        let k = k.trim().trim_start_matches(',').trim().to_owned();
        let v = v.trim_start();
        let (value, next) = match v.strip_prefix('"') {
            Some(q) => q.split_once('"').unwrap_or((q, "")),
            None => v.split_once(',').unwrap_or((v, "")),
        };
        params.push((k, value.to_owned()));
        rest = next.trim_start_matches(',').trim();
    }
    (scheme.to_owned(), params)
}

/// The credentials docker and podman keep for `registry`: an `auths` entry, or what its
/// credential helper (`credHelpers`, else `credsStore`) answers; none is not an error.
async fn credentials(registry: &str, t: Duration) -> Result<Option<(String, String)>, String> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let files = [
        std::env::var_os("REGISTRY_AUTH_FILE").map(std::path::PathBuf::from),
        std::env::var_os("DOCKER_CONFIG").map(|d| std::path::Path::new(&d).join("config.json")),
        home.map(|h| h.join(".docker/config.json")),
        std::env::var_os("XDG_RUNTIME_DIR")
            .map(|d| std::path::Path::new(&d).join("containers/auth.json")),
    ];
    let hub = registry == "registry-1.docker.io";
    for file in files.into_iter().flatten() {
        let Ok(text) = std::fs::read(&file) else { continue };
        let config: Value = serde_json::from_slice(&text)
            .map_err(|e| format!("{}: not a registry credentials file: {e}", file.display()))?;
        let matches = |key: &str| {
            let host = key.trim_start_matches("https://").trim_start_matches("http://");
            let host = host.split('/').next().unwrap_or_default();
            host == registry || (hub && matches!(host, "index.docker.io" | "docker.io"))
        };
        let auth = config["auths"]
            .as_object()
            .into_iter()
            .flatten()
            .find(|(k, _)| matches(k))
            .and_then(|(_, entry)| entry["auth"].as_str());
        if let Some(auth) = auth {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or(format!("{}: the auth for {registry} is not base64", file.display()))?;
            if let Some((u, p)) = decoded.split_once(':') {
                return Ok(Some((u.to_owned(), p.to_owned())));
            }
        }
        let helper = config["credHelpers"]
            .as_object()
            .into_iter()
            .flatten()
            .find(|(k, _)| matches(k))
            .and_then(|(_, v)| v.as_str())
            .or(config["credsStore"].as_str());
        if let Some(helper) = helper {
            return helper_credentials(helper, registry, t).await.map(Some);
        }
    }
    Ok(None)
}

/// `docker-credential-HELPER get`, the registry on its stdin: `{"Username", "Secret"}`.
async fn helper_credentials(
    helper: &str,
    registry: &str,
    t: Duration,
) -> Result<(String, String), String> {
    use tokio::io::AsyncWriteExt;
    let program = format!("docker-credential-{helper}");
    let mut child = tokio::process::Command::new(&program)
        .arg("get")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            format!(
                "{program} (the credential helper your docker config names for {registry}): {e}"
            )
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(registry.as_bytes()).await.map_err(|e| format!("{program}: {e}"))?;
    }
    let out = tokio::time::timeout(t, child.wait_with_output())
        .await
        .map_err(|_| format!("{program} get: no answer within {}s", t.as_secs()))?
        .map_err(|e| format!("{program}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} get {registry}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let v: Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("{program} get: {e}"))?;
    match (v["Username"].as_str(), v["Secret"].as_str()) {
        (Some(u), Some(s)) => Ok((u.to_owned(), s.to_owned())),
        _ => Err(format!("{program} get: no Username and Secret")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(image: &str) -> Reference {
        Reference::parse(image).expect("parses")
    }

    #[test]
    fn references_split_as_docker_splits_them() {
        let ar = r("europe-west1-docker.pkg.dev/p/dlock/leaderwatch@sha256:abc");
        assert_eq!(ar.registry, "europe-west1-docker.pkg.dev");
        assert_eq!(ar.repository, "p/dlock/leaderwatch");
        assert_eq!(ar.reference, "sha256:abc");
        assert!(!ar.plain_http);
        let tagged_and_pinned =
            r("europe-west1-docker.pkg.dev/p/dlock/leaderwatch:0.1.0@sha256:abc");
        assert_eq!(tagged_and_pinned.repository, "p/dlock/leaderwatch");
        assert_eq!(tagged_and_pinned.reference, "sha256:abc");
        assert_eq!(r("debian").repository, "library/debian");
        assert_eq!(r("debian").reference, "latest");
        assert_eq!(r("debian").registry, "registry-1.docker.io");
        assert_eq!(r("me/tool:1").repository, "me/tool");
        let local = r("127.0.0.1:5000/lw/leaderwatch:t");
        assert_eq!(
            (local.registry.as_str(), local.repository.as_str()),
            ("127.0.0.1:5000", "lw/leaderwatch")
        );
        assert!(local.plain_http);
        assert!(r("localhost/x:1").plain_http);
        assert!(Reference::parse("a b").is_err());
        assert!(Reference::parse("").is_err());
    }

    #[test]
    fn a_challenge_gives_its_scheme_and_parameters() {
        let (s, p) = parse_challenge(
            r#"Bearer realm="https://europe-west1-docker.pkg.dev/v2/token",service="europe-west1-docker.pkg.dev",scope="repository:p/dlock/leaderwatch:pull""#,
        );
        assert_eq!(s, "Bearer");
        assert_eq!(p[0], ("realm".into(), "https://europe-west1-docker.pkg.dev/v2/token".into()));
        assert_eq!(p[1], ("service".into(), "europe-west1-docker.pkg.dev".into()));
        assert_eq!(p[2].1, "repository:p/dlock/leaderwatch:pull");
        let (s, p) = parse_challenge(r#"Basic realm="Registry Realm""#);
        assert_eq!((s.as_str(), p[0].1.as_str()), ("Basic", "Registry Realm"));
    }

    #[test]
    fn an_index_gives_its_platforms_without_the_attestations() {
        let index: Value = serde_json::json!({"manifests": [
            {"platform": {"os": "linux", "architecture": "amd64"}},
            {"platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
            {"platform": {"os": "unknown", "architecture": "unknown"}},
        ]});
        let got: Vec<String> = index["manifests"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| platform_of(&m["platform"]))
            .filter(|p| p.os != "unknown")
            .map(|p| p.to_string())
            .collect();
        assert_eq!(got, ["linux/amd64", "linux/arm64"]);
    }
}
