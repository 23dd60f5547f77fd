//! `repowire-relay admin …`: the same operations as the admin HTTP API, on the database the
//! relay serves, printed for people (a table with a header) or, with `--json`, in the HTTP
//! API's shapes.

use std::io::Write;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::json;

use super::audit::{self, AdminCtx};
use super::{AdminError, create_key, create_tenant, list_keys, revoke_key};
use crate::config::{AdminCommand, KeyCommand, TenantCommand};
use crate::storage::store::{ApiKeyRecord, Store, TenantRecord};
use crate::tenancy::apikey::KeyMode;

/// Runs one admin command, printing its result to `out` (what scripts read) and notes for
/// people to `notes`.
pub async fn run(
    store: &dyn Store,
    command: AdminCommand,
    json: bool,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> anyhow::Result<()> {
    match command {
        AdminCommand::Tenant(TenantCommand::Create { name, plan }) => {
            let tenant = create_tenant(
                store,
                super::NewTenant {
                    name,
                    plan,
                    ..Default::default()
                },
            )
            .await?;
            let ctx = AdminCtx::cli();
            let id = Some(tenant.id.as_str());
            audit::record(
                store,
                &ctx,
                "tenant.create",
                &tenant.id,
                id,
                None::<&()>,
                Some(&tenant),
            )
            .await;
            print_tenants(out, json, std::slice::from_ref(&tenant), true)?;
        }
        AdminCommand::Tenant(TenantCommand::List) => {
            let tenants = store.list_tenants().await.map_err(AdminError::from)?;
            print_tenants(out, json, &tenants, false)?;
        }
        AdminCommand::Key(KeyCommand::Create {
            tenant,
            label,
            test,
            expires_in_days,
            scope,
        }) => {
            let mode = if test { KeyMode::Test } else { KeyMode::Live };
            let scopes = (!scope.is_empty()).then_some(scope.as_slice());
            let minted = create_key(store, &tenant, mode, &label, expires_in_days, scopes).await?;
            let key = &minted.record;
            let ctx = AdminCtx::cli();
            let tenant_id = Some(key.tenant_id.as_str());
            audit::record(
                store,
                &ctx,
                "key.create",
                &key.id,
                tenant_id,
                None::<&()>,
                Some(key),
            )
            .await;
            if json {
                let body = json!({"api_key": minted.text, "key": minted.record});
                writeln!(out, "{body:#}")?;
            } else {
                writeln!(
                    notes,
                    "key {} for tenant {} (shown once, keep it):",
                    minted.record.id, minted.record.tenant_id
                )?;
                writeln!(out, "{}", minted.text)?;
            }
        }
        AdminCommand::Tenant(TenantCommand::Show { tenant }) => {
            let detail = super::get_tenant(store, &tenant).await?;
            print_detail(out, json, &detail)?;
        }
        AdminCommand::Tenant(TenantCommand::Suspend { tenant }) => {
            let detail = tenant_change(store, &tenant, "tenant.suspend", |s, t| {
                Box::pin(super::tenants::set_suspended(s, t, true))
            })
            .await?;
            print_detail(out, json, &detail)?;
        }
        AdminCommand::Tenant(TenantCommand::Resume { tenant }) => {
            let detail = tenant_change(store, &tenant, "tenant.resume", |s, t| {
                Box::pin(super::tenants::set_suspended(s, t, false))
            })
            .await?;
            print_detail(out, json, &detail)?;
        }
        AdminCommand::Tenant(TenantCommand::Delete { tenant }) => {
            let detail = tenant_change(store, &tenant, "tenant.delete", |s, t| {
                Box::pin(super::tenants::delete_tenant(s, t))
            })
            .await?;
            print_detail(out, json, &detail)?;
        }
        AdminCommand::Usage { period, csv } => {
            let (from, to) = crate::tenancy::usage::parse_month(&period).ok_or_else(|| {
                AdminError::Invalid(format!("period `{period}` is not a month (YYYY-MM)"))
            })?;
            let month = crate::tenancy::usage::Granularity::Month;
            let periods = crate::tenancy::usage::report(store, None, from, to, month)
                .await
                .map_err(AdminError::from)?;
            if csv {
                let mut names = std::collections::BTreeMap::new();
                for t in store.list_tenants().await.map_err(AdminError::from)? {
                    names.insert(t.id, t.name);
                }
                write!(
                    out,
                    "{}",
                    crate::tenancy::usage::csv(&periods, month, &names)
                )?;
            } else if json {
                writeln!(out, "{:#}", json!(periods))?;
            } else {
                let rows = periods
                    .iter()
                    .flat_map(|p| {
                        p.metrics.iter().map(move |(metric, value)| {
                            vec![p.tenant_id.clone(), metric.clone(), value.to_string()]
                        })
                    })
                    .collect::<Vec<_>>();
                table(out, &["TENANT", "METRIC", "VALUE"], rows)?;
            }
        }
        AdminCommand::Key(KeyCommand::List { tenant }) => {
            print_keys(out, json, &list_keys(store, &tenant).await?)?;
        }
        AdminCommand::Key(KeyCommand::Revoke { key_id }) => {
            let before = super::get_key(store, &key_id).await?;
            revoke_key(store, None, &key_id).await?;
            let after = super::get_key(store, &key_id).await?;
            let tenant_id = Some(before.tenant_id.as_str());
            let ctx = AdminCtx::cli();
            audit::record(
                store,
                &ctx,
                "key.revoke",
                &key_id,
                tenant_id,
                Some(&before),
                Some(&after),
            )
            .await;
            if json {
                writeln!(out, "{:#}", json!({"revoked": key_id}))?;
            } else {
                writeln!(
                    out,
                    "revoked {key_id}: new tokens are refused now; running relays close its connections within their key check interval"
                )?;
            }
        }
    }
    Ok(())
}

/// A tenant write through `op`, audited with its state before and after.
async fn tenant_change<F>(
    store: &dyn Store,
    tenant: &str,
    action: &str,
    op: F,
) -> Result<super::TenantDetail, AdminError>
where
    F: for<'a> FnOnce(
        &'a dyn Store,
        &'a str,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<super::TenantDetail, AdminError>> + Send + 'a>,
    >,
{
    let before = super::get_tenant(store, tenant).await?;
    let after = op(store, tenant).await?;
    let id = after.tenant.id.as_str();
    let ctx = AdminCtx::cli();
    audit::record(
        store,
        &ctx,
        action,
        id,
        Some(id),
        Some(&before),
        Some(&after),
    )
    .await;
    Ok(after)
}

fn print_detail(
    out: &mut dyn Write,
    json: bool,
    detail: &super::TenantDetail,
) -> std::io::Result<()> {
    if json {
        return writeln!(out, "{:#}", json!(detail));
    }
    let t = &detail.tenant;
    let state = match (t.deleted_at_ms, t.suspended_at_ms) {
        (Some(at), _) => format!("deleted {}", time(Some(at))),
        (None, Some(at)) => format!("suspended {}", time(Some(at))),
        (None, None) => "active".to_owned(),
    };
    let limit = |v: Option<i64>| v.map_or("unlimited".to_owned(), |n| n.to_string());
    let l = &detail.effective_limits;
    writeln!(out, "tenant   {} ({})", t.name, t.id)?;
    writeln!(out, "plan     {}", t.plan)?;
    writeln!(out, "state    {state}")?;
    writeln!(
        out,
        "limits   peers {}, connections {}, message bytes {}, inbox {}, per minute {}, per month {}, state bytes {}, stored peers {}",
        limit(l.max_peers),
        limit(l.max_connections),
        limit(l.max_message_bytes),
        limit(l.inbox_cap),
        limit(l.messages_per_minute),
        limit(l.messages_per_month),
        limit(l.max_state_bytes),
        limit(l.max_stored_peers)
    )?;
    writeln!(
        out,
        "stored   peers {}, state bytes {}",
        detail.stored_peers, detail.state_bytes
    )
}

fn print_tenants(
    out: &mut dyn Write,
    json: bool,
    tenants: &[TenantRecord],
    one: bool,
) -> std::io::Result<()> {
    if json {
        let body = if one {
            json!(tenants.first())
        } else {
            json!(tenants)
        };
        return writeln!(out, "{body:#}");
    }
    let rows = tenants
        .iter()
        .map(|t| {
            vec![
                t.id.clone(),
                t.name.clone(),
                t.plan.clone(),
                time(Some(t.created_at_ms)),
            ]
        })
        .collect();
    table(out, &["ID", "NAME", "PLAN", "CREATED"], rows)
}

fn print_keys(out: &mut dyn Write, json: bool, keys: &[ApiKeyRecord]) -> std::io::Result<()> {
    if json {
        return writeln!(out, "{:#}", json!(keys));
    }
    let now = crate::ids::now_ms();
    let rows = keys
        .iter()
        .map(|k| {
            let state = if k.revoked_at_ms.is_some() {
                "revoked"
            } else if !k.usable_at(now) {
                "expired"
            } else {
                "active"
            };
            vec![
                k.id.clone(),
                k.display.clone(),
                state.to_owned(),
                k.label.clone(),
                time(Some(k.created_at_ms)),
                time(k.expires_at_ms),
                time(k.last_used_at_ms),
            ]
        })
        .collect();
    table(
        out,
        &[
            "ID",
            "KEY",
            "STATE",
            "LABEL",
            "CREATED",
            "EXPIRES",
            "LAST USED",
        ],
        rows,
    )
}

/// A UTC time to the second, or `-`.
fn time(ms: Option<i64>) -> String {
    match ms.and_then(|ms| u64::try_from(ms).ok()) {
        Some(ms) => {
            humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
        }
        None => "-".into(),
    }
}

/// Left-aligned columns two spaces apart, under a header.
fn table(out: &mut dyn Write, header: &[&str], rows: Vec<Vec<String>>) -> std::io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |out: &mut dyn Write, cells: Vec<&str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<w$}  "));
            }
        }
        writeln!(out, "{}", text.trim_end())
    };
    line(out, header.to_vec())?;
    for row in &rows {
        line(out, row.iter().map(String::as_str).collect())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_a_header_and_aligned_columns() {
        let mut out = Vec::new();
        table(
            &mut out,
            &["ID", "NAME"],
            vec![
                vec!["tnt-1".into(), "acme".into()],
                vec!["tnt-22".into(), "b".into()],
            ],
        )
        .expect("write");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "ID      NAME\ntnt-1   acme\ntnt-22  b\n"
        );
    }

    #[test]
    fn times_are_utc_to_the_second() {
        assert_eq!(time(Some(1_763_712_000_123)), "2025-11-21T08:00:00Z");
        assert_eq!(time(None), "-");
    }
}
