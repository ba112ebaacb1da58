//! How long S3-FIFO's ghosts remember, learnt from the hit ratio: Caffeine's hill climber
//! (Einziger, Eytan, Friedman and Manes, "Adaptive Software Cache Management", Middleware
//! 2018), which there sizes W-TinyLFU's window, with its published constants.
//!
//! A key that leaves the small queue unused and comes back while a ghost goes to main. The
//! longer the ghosts remember, the more keys that return go to main: what most traces
//! reward, and what a loop a little longer than the cache punishes, each returning key
//! pushing out of main one that is about to be asked for. The climber measures the
//! shard's hit ratio over samples of requests, moves the ghosts' reach a step at a time,
//! keeps its direction while the hit ratio rises and turns when it falls; the step
//! shrinks as it settles, and starts over when the hit ratio jumps (the workload changed).

/// Requests per sample, in multiples of the keys the ghosts remember at full reach, which
/// stands for the cache's size in keys whatever its entries weigh (Caffeine: ten times
/// the cache's size).
const SAMPLE: u64 = 10;

/// Requests per sample at least, so that a small shard's hit ratio is measured within
/// about 1.6 points (the standard error of a ratio over 1,024 requests, at most
/// `sqrt(0.25 / 1024)`): its changes are then mostly the workload's, not chance's.
const MIN_SAMPLE: u64 = 1024;

/// The first step, and the step after a restart, as a share of the ghosts' full reach
/// (Caffeine: 6.25% of the cache). It is also the least reach: one step.
pub(crate) const STEP: f64 = 0.0625;

/// Each step is this share of the one before, so that the climber settles (Caffeine: 0.98).
const DECAY: f64 = 0.98;

/// A change of the hit ratio between samples this large starts the step over (Caffeine:
/// 0.05).
pub(crate) const RESTART: f64 = 0.05;

/// One knob's hill: the hit ratio of the last sample that moved it, and its next step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Hill {
    /// The hit ratio of the last sample that moved this knob.
    previous: f64,
    /// The next move, as a share of the knob's full range: its sign is the direction.
    step: f64,
}

impl Hill {
    /// A hill whose first move lowers its knob.
    pub(crate) fn new() -> Self {
        Hill { previous: 0.0, step: -STEP }
    }

    /// The move after a sample of hit ratio `rate`, and the step after it: the same way
    /// while the hit ratio rises, the other when it falls; smaller each time, and
    /// [`STEP`] again after a jump of [`RESTART`].
    pub(crate) fn climb(&mut self, rate: f64) -> f64 {
        let change = rate - self.previous;
        let amount = if change >= 0.0 { self.step } else { -self.step };
        self.step = if change.abs() >= RESTART { STEP.copysign(amount) } else { DECAY * amount };
        self.previous = rate;
        amount
    }

    #[cfg(feature = "serde")]
    /// Appends the last hit ratio and the step, as `f64` bits (little-endian).
    pub(crate) fn save(&self, out: &mut Vec<u8>) {
        for field in [self.previous.to_bits(), self.step.to_bits()] {
            out.extend_from_slice(&field.to_le_bytes());
        }
    }

    #[cfg(feature = "serde")]
    /// Reads what [`Hill::save`] wrote; an error if out of range.
    pub(crate) fn restore<R: std::io::Read + ?Sized>(
        d: &mut crate::snapshot::Decoder<'_, R>,
    ) -> Result<Self, crate::snapshot::SnapshotError> {
        let (previous, step) = (f64::from_bits(d.u64()?), f64::from_bits(d.u64()?));
        if !(0.0..=1.0).contains(&previous) || !(-STEP..=STEP).contains(&step) {
            return Err(crate::snapshot::SnapshotError::inconsistent("cache climber"));
        }
        Ok(Hill { previous, step })
    }
}

/// A shard's climber: the sample so far, the last sample's hit ratio and the next step.
///
/// A miss costs a decrement and a comparison: the sample ends when the hits the shard's
/// lock has counted since it began reach `left`, which starts at the sample's length and
/// comes one closer with each miss (hits and misses together make the sample).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Climber {
    /// Requests per sample.
    sample: u64,
    /// The hits the shard's lock had counted when the sample began (wrapping: a restored
    /// sample may have begun before the lock counted any).
    start: u64,
    /// The sample's length less its misses so far: the sample ends when the hits since
    /// `start` reach it.
    left: u64,
    /// The ghosts' reach's hill.
    reach: Hill,
}

impl Climber {
    /// A climber for a shard whose lock has counted `hits` and whose ghosts remember
    /// `keys` keys at full reach: samples of `SAMPLE` times `keys` requests (and
    /// [`MIN_SAMPLE`] at least). Its first move shortens the reach (it starts full).
    pub(crate) fn new(hits: u64, keys: usize) -> Self {
        let sample = SAMPLE.saturating_mul(keys as u64).max(MIN_SAMPLE);
        Climber { sample, start: hits, left: sample, reach: Hill::new() }
    }

    /// Counts a miss, with `hits` the hits the shard's lock has counted so far; at the
    /// end of a sample, its hit ratio (the next sample starts).
    #[inline(always)]
    pub(crate) fn miss(&mut self, hits: u64) -> Option<f64> {
        self.left -= 1;
        if hits.wrapping_sub(self.start) < self.left {
            return None;
        }
        Some(self.end(hits))
    }

    /// The move to make to the reach after a sample of hit ratio `rate`, as a share of the
    /// full reach.
    pub(crate) fn reach(&mut self, rate: f64) -> f64 {
        self.reach.climb(rate)
    }

    /// Hits and misses in the sample so far, with `hits` the lock's count.
    fn counts(&self, hits: u64) -> (u64, u64) {
        (hits.wrapping_sub(self.start), self.sample - self.left)
    }

    /// The end of a sample, with `hits` the lock's count: its hit ratio.
    #[cold]
    #[inline(never)]
    fn end(&mut self, hits: u64) -> f64 {
        let (sampled, misses) = self.counts(hits);
        (self.start, self.left) = (hits, self.sample);
        sampled as f64 / (sampled + misses) as f64
    }

    #[cfg(feature = "serde")]
    /// Appends the climber's state to `out`, for a cache's save, with `hits` the shard's
    /// lock's count (little-endian: the hits and misses of the sample so far, then the last
    /// hit ratio and the step as `f64` bits).
    pub(crate) fn save(&self, hits: u64, out: &mut Vec<u8>) {
        let (sampled, misses) = self.counts(hits);
        for field in [sampled, misses] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        self.reach.save(out);
    }

    #[cfg(feature = "serde")]
    /// Reads what [`Climber::save`] wrote, for a shard whose lock has counted `hits` and
    /// whose ghosts remember `keys` keys at full reach; an error if a field is out of
    /// range.
    pub(crate) fn restore<R: std::io::Read + ?Sized>(
        d: &mut crate::snapshot::Decoder<'_, R>,
        hits: u64,
        keys: usize,
    ) -> Result<Self, crate::snapshot::SnapshotError> {
        let (sampled, misses) = (d.u64()?, d.u64()?);
        let reach = Hill::restore(d)?;
        // Counts past 2^62 come from no sample (and could overflow as requests are added).
        if sampled.max(misses) > 1 << 62 {
            return Err(crate::snapshot::SnapshotError::inconsistent("cache climber"));
        }
        let fresh = Climber::new(hits, keys);
        // The sample so far counts on: it began `sampled` hits ago, and its misses brought
        // its end closer (a sample already over ends at the next miss).
        let (start, left) = (hits.wrapping_sub(sampled), fresh.sample.saturating_sub(misses).max(1));
        Ok(Climber { start, left, reach, ..fresh })
    }
}

#[cfg(all(test, not(cuckoo_gate_loom)))]
mod tests {
    use super::{Climber, MIN_SAMPLE, RESTART, SAMPLE, STEP};

    /// Runs one sample of the climber's requests at hit ratio `rate`; the move it makes.
    fn sample(climber: &mut Climber, hits: &mut u64, rate: f64) -> f64 {
        let requests = climber.sample;
        let (hit_count, misses) =
            ((requests as f64 * rate) as u64, requests - (requests as f64 * rate) as u64);
        *hits += hit_count;
        for _ in 1..misses {
            assert_eq!(climber.miss(*hits), None, "no move within a sample");
        }
        let rate = climber.miss(*hits).expect("a sample's end");
        climber.reach(rate)
    }

    #[test]
    fn it_keeps_its_direction_while_the_hit_ratio_rises_and_turns_when_it_falls() {
        assert_eq!(Climber::new(0, 10).sample, MIN_SAMPLE, "a small shard's sample");
        let (mut climber, mut hits) = (Climber::new(7, 200), 7);
        assert_eq!(climber.sample, 200 * SAMPLE);
        assert_eq!(sample(&mut climber, &mut hits, 0.30), -STEP, "first, a shorter reach");
        let rising = sample(&mut climber, &mut hits, 0.31);
        assert_eq!(rising, -STEP, "the same way");
        let falling = sample(&mut climber, &mut hits, 0.30);
        assert!(falling > 0.0 && falling < STEP, "turned back, a smaller step: {falling}");
        // The step shrinks as the climber goes on: it settles.
        let mut last = falling.abs();
        for i in 0..50 {
            let step = sample(&mut climber, &mut hits, 0.30 + f64::from(i % 2) * 0.001).abs();
            assert!(step < last, "{step} after {last}");
            last = step;
        }
        // A jump in the hit ratio (the workload changed) starts the step over.
        assert_eq!(sample(&mut climber, &mut hits, 0.30 + RESTART + 0.01).abs(), last * 0.98);
        assert_eq!(sample(&mut climber, &mut hits, 0.31 + RESTART).abs(), STEP);
    }
}
