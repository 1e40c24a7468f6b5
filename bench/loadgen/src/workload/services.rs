//! The fleet: services with plausible names, each on one base profile, with pods spread
//! over regions, and the series labels every profile of a pod carries.

use super::base::BASES;
use super::rng::{Rng, hash, tag};

/// Service names of a plausible micro-service fleet; past the list, `svc-<n>`.
const NAMES: [&str; 24] = [
    "checkout",
    "cart",
    "payments",
    "api-gateway",
    "auth",
    "search",
    "recommendations",
    "inventory",
    "shipping",
    "notifications",
    "user-profile",
    "orders",
    "pricing",
    "catalog",
    "ads",
    "fraud-detection",
    "email",
    "currency",
    "ledger",
    "reporting",
    "image-resizer",
    "sessions",
    "billing",
    "quotes",
];

/// Namespaces services are deployed in.
const NAMESPACES: [&str; 4] = ["shop", "platform", "payments", "growth"];

/// Regions pods run in.
pub(crate) const REGIONS: [&str; 4] = ["us-east-1", "eu-west-1", "us-west-2", "ap-southeast-2"];

/// Which base (index into [`BASES`]) each service runs on, cycled: half the fleet is Go CPU
/// (the case), the rest spreads over the other languages and the Go heap profile.
const BASE_CYCLE: [usize; 12] = [0, 1, 0, 2, 4, 0, 5, 3, 0, 6, 1, 7];

/// One pod of a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// Kubernetes-style pod name (`checkout-7f9c8d6b5-xk2p9`).
    pub name: String,
    /// Region it runs in.
    pub region: &'static str,
}

/// One service of the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// `service_name` label.
    pub name: String,
    /// `namespace` label.
    pub namespace: &'static str,
    /// Index of its base profile in [`BASES`].
    pub base: usize,
    /// Its pods (3 to 30); profile `k` of the service comes from pod `k mod pods`.
    pub pods: Vec<Pod>,
}

impl Service {
    /// The seeded service number `index` of the fleet.
    pub(crate) fn new(seed: u64, index: usize) -> Service {
        let name = NAMES
            .get(index)
            .map_or_else(|| format!("svc-{index}"), |n| (*n).to_string());
        let mut rng = Rng::new(hash(&[seed, tag::SERVICE, index as u64]));
        let namespace = NAMESPACES[rng.below(NAMESPACES.len())];
        // Pod counts skewed small, as in real fleets: 3..=30, most under 10.
        let pods = 3 + (27.0 * rng.unit().powi(2)).round() as usize;
        // A service runs in 1 to 4 regions; its pods are spread over them.
        let regions = 1 + rng.below(REGIONS.len());
        let first_region = rng.below(REGIONS.len());
        let replica_set = alnum(&mut rng, "0123456789abcdef", 9);
        let pods = (0..pods)
            .map(|p| {
                let mut prng = Rng::new(hash(&[seed, tag::POD, index as u64, p as u64]));
                Pod {
                    name: format!(
                        "{name}-{replica_set}-{}",
                        alnum(&mut prng, "bcdfghjklmnpqrstvwxz2456789", 5)
                    ),
                    region: REGIONS[(first_region + p % regions) % REGIONS.len()],
                }
            })
            .collect();
        Service {
            name,
            namespace,
            base: BASE_CYCLE[index % BASE_CYCLE.len()] % BASES.len(),
            pods,
        }
    }

    /// The series labels of the service's profile number `k`: `service_name`, `namespace`,
    /// `pod`, `region`.
    pub fn labels(&self, k: u64) -> Vec<(String, String)> {
        let pod = &self.pods[(k % self.pods.len() as u64) as usize];
        vec![
            ("service_name".into(), self.name.clone()),
            ("namespace".into(), self.namespace.into()),
            ("pod".into(), pod.name.clone()),
            ("region".into(), pod.region.into()),
        ]
    }
}

/// `n` characters drawn from `alphabet`.
fn alnum(rng: &mut Rng, alphabet: &str, n: usize) -> String {
    let a = alphabet.as_bytes();
    (0..n).map(|_| a[rng.below(a.len())] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fleet_is_seeded_and_plausible() {
        let fleet: Vec<Service> = (0..30).map(|i| Service::new(7, i)).collect();
        assert_eq!(
            fleet,
            (0..30).map(|i| Service::new(7, i)).collect::<Vec<_>>()
        );
        assert_ne!(fleet[0].pods, Service::new(8, 0).pods);
        assert_eq!(fleet[0].name, "checkout");
        assert_eq!(fleet[0].base, 0, "service 0 is the Go CPU one");
        for s in &fleet {
            assert!((3..=30).contains(&s.pods.len()), "{}", s.pods.len());
            assert!(s.pods[0].name.starts_with(&format!("{}-", s.name)));
            let labels = s.labels(5);
            assert_eq!(labels.len(), 4);
            assert_eq!(labels[2].1, s.pods[5 % s.pods.len()].name);
        }
        let bases: std::collections::HashSet<usize> = fleet.iter().map(|s| s.base).collect();
        assert_eq!(
            bases.len(),
            BASES.len(),
            "every base is used by some service"
        );
    }
}
