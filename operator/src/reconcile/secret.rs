//! The Secret an ApiKey writes: what it holds, whether it is ours, whether it holds the key.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::crd::ApiKey;

/// Data keys of the Secret.
pub mod keys {
    /// The API key text.
    pub const API_KEY: &str = "apiKey";
    /// The relay URL clients use.
    pub const RELAY_URL: &str = "relayUrl";
    /// The relay's id of the key (not secret; lets the operator recognise its key).
    pub const KEY_ID: &str = "keyId";
    /// The key again, named as the `repowire` client reads it from the environment (for
    /// `envFrom`).
    pub const ENV_API_KEY: &str = "REPOWIRE_API_KEY";
    /// The URL again, named as the client reads it.
    pub const ENV_RELAY_URL: &str = "REPOWIRE_RELAY_URL";
}

/// The label every Secret the operator writes carries.
pub const MANAGED_LABEL: &str = "app.kubernetes.io/managed-by";

/// The Secret holding `api_key` (id `key_id`) for `owner`.
pub fn build(owner: &ApiKey, key_id: &str, api_key: &str, relay_url: &str) -> Secret {
    let extra = owner.spec.secret_metadata.clone().unwrap_or_default();
    let mut labels = extra.labels;
    labels.insert(MANAGED_LABEL.into(), "repowire-operator".into());
    labels.insert("repowire.io/api-key".into(), owner.name_any());
    let data: BTreeMap<String, ByteString> = [
        (keys::API_KEY, api_key),
        (keys::RELAY_URL, relay_url),
        (keys::KEY_ID, key_id),
        (keys::ENV_API_KEY, api_key),
        (keys::ENV_RELAY_URL, relay_url),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
    .collect();
    Secret {
        metadata: ObjectMeta {
            name: Some(owner.spec.secret_name.clone()),
            namespace: owner.namespace(),
            labels: Some(labels),
            annotations: (!extra.annotations.is_empty()).then_some(extra.annotations),
            // The ApiKey owns it: deleting the ApiKey in the foreground waits for its Secret
            // (the RBAC grants `apikeys/finalizers` for this).
            owner_references: owner.controller_owner_ref(&()).map(|mut r| {
                r.block_owner_deletion = Some(true);
                vec![r]
            }),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some(data),
        ..Secret::default()
    }
}

/// Whether `secret` is owned by `owner` (an owner reference with its uid).
pub fn owned_by(secret: &Secret, owner: &ApiKey) -> bool {
    let uid = owner.meta().uid.as_deref();
    secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| Some(r.uid.as_str()) == uid)
}

/// A data value as text.
pub fn value<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret
        .data
        .as_ref()?
        .get(key)
        .and_then(|b| std::str::from_utf8(&b.0).ok())
}

/// Whether `secret` holds key `key_id` (its text starting with the key's `prefix`).
pub fn holds(secret: &Secret, key_id: &str, prefix: &str) -> bool {
    value(secret, keys::KEY_ID) == Some(key_id)
        && value(secret, keys::API_KEY)
            .is_some_and(|k| k.starts_with(prefix) && k.len() > prefix.len())
}

/// Whether `secret` already has what [`build`] would write (so no write is needed).
pub fn in_place(secret: &Secret, wanted: &Secret) -> bool {
    let subset = |have: &Option<BTreeMap<String, String>>,
                  want: &Option<BTreeMap<String, String>>| {
        want.iter()
            .flatten()
            .all(|(k, v)| have.as_ref().and_then(|h| h.get(k)) == Some(v))
    };
    secret.data == wanted.data
        && secret.type_ == wanted.type_
        && subset(&secret.metadata.labels, &wanted.metadata.labels)
        && subset(&secret.metadata.annotations, &wanted.metadata.annotations)
}
