//! Seeded, stateless randomness: every decision of the generator is a hash of the seed and
//! of what it decides about (service, slot, time index, ...), so any profile can be made on
//! its own, in any order, on any thread, and always comes out the same.

/// SplitMix64's finaliser: a strong 64-bit mixer (every input bit flips about half the
/// output bits), which is all a stateless generator needs.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes a sequence of words into one, order-sensitive.
pub(crate) fn hash(parts: &[u64]) -> u64 {
    parts.iter().fold(0x6A09_E667_F3BC_C909, |h, &p| mix(h ^ p))
}

/// A uniform float in [0, 1) from a hash.
pub(crate) fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Tags that keep the hashes of different decisions apart (same inputs, different
/// question, independent answers).
pub(crate) mod tag {
    pub(crate) const SERVICE: u64 = 1;
    pub(crate) const POD: u64 = 2;
    pub(crate) const SLOT_PHASE: u64 = 3;
    pub(crate) const SLOT_ON: u64 = 4;
    pub(crate) const SYNTH: u64 = 5;
    pub(crate) const RENAME: u64 = 6;
    pub(crate) const NOISE: u64 = 7;
    pub(crate) const LABELS: u64 = 8;
    pub(crate) const SLOT_LIFE: u64 = 9;
    pub(crate) const DEPLOY: u64 = 10;
}

/// A small sequential generator for one decision that needs several numbers (a synthetic
/// stack's recombination, a sample's noise): seeded from a [`hash`].
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (typically a [`hash`] of the decision's inputs).
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        unit(self.next_u64())
    }

    /// Uniform in `0..n` (`n` > 0; 0 when `n` is 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A standard normal deviate (Box-Muller).
    pub(crate) fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(1e-300);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// A lognormal factor with median 1 and log-standard-deviation `sigma`.
    pub(crate) fn lognormal(&mut self, sigma: f64) -> f64 {
        (sigma * self.normal()).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_differ_by_order_and_rng_is_uniform_enough() {
        assert_ne!(hash(&[1, 2]), hash(&[2, 1]));
        let mut r = Rng::new(42);
        let n = 100_000;
        let mean = (0..n).map(|_| r.unit()).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        let below: Vec<usize> = (0..1000).map(|_| r.below(7)).collect();
        assert!(below.iter().all(|&b| b < 7));
        assert!((0..7).all(|v| below.contains(&v)));
        let logs = (0..n).map(|_| r.lognormal(0.3).ln()).sum::<f64>() / n as f64;
        assert!(logs.abs() < 0.01, "{logs}");
    }
}
