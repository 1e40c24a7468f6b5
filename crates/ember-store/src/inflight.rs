//! Decompressed profile bytes held by ingests that are still running, per tenant and in all,
//! and the refusal once either passes its limit.
//!
//! An ingest holds every decompressed profile of its batch from decompression until the
//! batch is applied (after the log's fsync), so the memory of many concurrent requests adds
//! up. Each batch takes its total here once it is decompressed and gives it back when
//! [`Held`] drops. Taking never waits: a batch that does not fit is refused at once (the
//! client retries later), so two batches can never each hold part of the budget while
//! waiting for the other's share.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::{IngestError, IngestLimits};

/// Bytes held per tenant and in all.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    held: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    /// Only tenants with bytes held (an entry goes when its count is back to 0, so tenants
    /// that come and go leave nothing behind).
    by_tenant: HashMap<String, u64>,
    total: u64,
}

/// A batch's share of the in-flight budget; given back on drop.
#[derive(Debug)]
pub(crate) struct Held<'a> {
    inflight: &'a InFlight,
    tenant: &'a str,
    bytes: u64,
}

impl InFlight {
    /// Takes `bytes` for a batch of `tenant`, or refuses it: [`IngestError::BatchTooLarge`]
    /// when the batch alone is over a limit (it could never fit), [`IngestError::Busy`] when
    /// it would pass the tenant's or the store's limit with what others hold now. A limit
    /// of 0 is no limit.
    pub(crate) fn hold<'a>(
        &'a self,
        tenant: &'a str,
        bytes: u64,
        limits: &IngestLimits,
    ) -> Result<Held<'a>, IngestError> {
        let per_tenant = limits.max_tenant_decompressed_bytes_in_flight;
        let total_limit = limits.max_decompressed_bytes_in_flight;
        if (per_tenant == 0 && total_limit == 0) || bytes == 0 {
            return Ok(Held {
                inflight: self,
                tenant,
                bytes: 0,
            });
        }
        for limit in [per_tenant, total_limit] {
            if limit != 0 && bytes > limit {
                return Err(IngestError::BatchTooLarge { limit });
            }
        }
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let mine = held.by_tenant.get(tenant).copied().unwrap_or(0);
        if per_tenant != 0 && mine + bytes > per_tenant {
            return Err(IngestError::Busy {
                tenant: Some(tenant.to_string()),
                limit: per_tenant,
            });
        }
        if total_limit != 0 && held.total + bytes > total_limit {
            return Err(IngestError::Busy {
                tenant: None,
                limit: total_limit,
            });
        }
        held.total += bytes;
        match held.by_tenant.get_mut(tenant) {
            Some(n) => *n += bytes,
            None => {
                held.by_tenant.insert(tenant.to_string(), bytes);
            }
        }
        Ok(Held {
            inflight: self,
            tenant,
            bytes,
        })
    }

    /// `(bytes held in all, tenants holding some)`.
    #[cfg(test)]
    fn stats(&self) -> (u64, usize) {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        (held.total, held.by_tenant.len())
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let mut held = self.inflight.held.lock().unwrap_or_else(|e| e.into_inner());
        held.total = held.total.saturating_sub(self.bytes);
        if let Some(n) = held.by_tenant.get_mut(self.tenant) {
            *n = n.saturating_sub(self.bytes);
            if *n == 0 {
                held.by_tenant.remove(self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_tenant: u64, total: u64) -> IngestLimits {
        IngestLimits {
            max_tenant_decompressed_bytes_in_flight: per_tenant,
            max_decompressed_bytes_in_flight: total,
            ..IngestLimits::default()
        }
    }

    #[test]
    fn holds_within_the_limits_and_gives_back_on_drop() {
        let f = InFlight::default();
        let l = limits(100, 150);
        let a = f.hold("a", 60, &l).unwrap();
        // The tenant's limit: 60 + 50 > 100.
        let err = f.hold("a", 50, &l).unwrap_err();
        assert!(
            matches!(&err, IngestError::Busy { tenant: Some(t), limit: 100 } if t == "a"),
            "{err:?}"
        );
        let b = f.hold("b", 80, &l).unwrap();
        // The store's limit: 140 + 20 > 150, although tenant c holds nothing.
        let err = f.hold("c", 20, &l).unwrap_err();
        assert!(
            matches!(
                err,
                IngestError::Busy {
                    tenant: None,
                    limit: 150
                }
            ),
            "{err:?}"
        );
        // More than a limit by itself can never fit: refused as too large, not busy.
        let err = f.hold("d", 101, &l).unwrap_err();
        assert!(
            matches!(err, IngestError::BatchTooLarge { limit: 100 }),
            "{err:?}"
        );
        assert_eq!(f.stats(), (140, 2));
        drop(a);
        drop(b);
        assert_eq!(f.stats(), (0, 0));
        let _c = f.hold("c", 100, &l).unwrap();
        // No limits, nothing counted.
        let free = InFlight::default();
        let _h = free.hold("a", u64::MAX, &limits(0, 0)).unwrap();
        assert_eq!(free.stats(), (0, 0));
    }
}
