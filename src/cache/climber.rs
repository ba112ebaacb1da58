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
const RESTART: f64 = 0.05;

/// What a climber's move is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Knob {
    /// How long the ghosts remember.
    Reach,
    /// How much a returning ghost's recency counts against main's victim's frequency
    /// (S3-FIFO with a frequency sketch).
    Credit,
}

/// One knob's hill: the hit ratio of the last sample that moved it and its next step.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Hill {
    /// The hit ratio of the last sample that moved this knob.
    previous: f64,
    /// The next move, as a share of the knob's full range: its sign is the direction.
    step: f64,
}

impl Hill {
    /// A hill whose first move is towards `direction` (-1 or 1).
    fn new(direction: f64) -> Self {
        Hill { previous: 0.0, step: STEP.copysign(direction) }
    }

    /// The move after a sample of hit ratio `rate`, and the step after it.
    fn climb(&mut self, rate: f64) -> f64 {
        let change = rate - self.previous;
        let amount = if change >= 0.0 { self.step } else { -self.step };
        self.step = if change.abs() >= RESTART { STEP.copysign(amount) } else { DECAY * amount };
        self.previous = rate;
        amount
    }

    #[cfg(feature = "serde")]
    /// Reads a hill's two fields; an error if out of range.
    fn restore<R: std::io::Read + ?Sized>(
        d: &mut crate::snapshot::Decoder<'_, R>,
    ) -> Result<Self, crate::snapshot::SnapshotError> {
        let (previous, step) = (f64::from_bits(d.u64()?), f64::from_bits(d.u64()?));
        if !(0.0..=1.0).contains(&previous) || !(-STEP..=STEP).contains(&step) {
            return Err(crate::snapshot::SnapshotError::inconsistent("cache climber"));
        }
        Ok(Hill { previous, step })
    }
}

/// A shard's climber: the sample so far, and for each knob it moves, the last hit ratio
/// that moved it and its next step. With two knobs, samples move them in turn, so that
/// each move is judged by a sample of its own.
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
    /// The ghosts' reach.
    reach: Hill,
    /// The recency credit, under S3-FIFO with a sketch.
    credit: Option<Hill>,
    /// Whether the sample under way moves the credit.
    turn: bool,
}

impl Climber {
    /// A climber for a shard whose lock has counted `hits` and whose ghosts remember
    /// `keys` keys at full reach: samples of `SAMPLE` times `keys` requests (and
    /// [`MIN_SAMPLE`] at least). Its first move shortens the reach (it starts full). With
    /// `credit` it also moves the recency credit, first downwards, in the samples between.
    pub(crate) fn new(hits: u64, keys: usize, credit: bool) -> Self {
        let sample = SAMPLE.saturating_mul(keys as u64).max(MIN_SAMPLE);
        Climber {
            sample,
            start: hits,
            left: sample,
            reach: Hill::new(-1.0),
            credit: credit.then(|| Hill::new(-1.0)),
            turn: false,
        }
    }

    /// Counts a miss, with `hits` the hits the shard's lock has counted so far; at the
    /// end of a sample, the knob to move and the move, as a share of its full range.
    #[inline(always)]
    pub(crate) fn miss(&mut self, hits: u64) -> Option<(Knob, f64)> {
        self.left -= 1;
        if hits.wrapping_sub(self.start) < self.left {
            return None;
        }
        Some(self.adjust(hits))
    }

    /// Hits and misses in the sample so far, with `hits` the lock's count.
    fn counts(&self, hits: u64) -> (u64, u64) {
        (hits.wrapping_sub(self.start), self.sample - self.left)
    }

    /// The end of a sample, with `hits` the lock's count: the knob its turn moves, the
    /// move, and the step after it.
    #[cold]
    #[inline(never)]
    fn adjust(&mut self, hits: u64) -> (Knob, f64) {
        let (sampled, misses) = self.counts(hits);
        let rate = sampled as f64 / (sampled + misses) as f64;
        (self.start, self.left) = (hits, self.sample);
        match (&mut self.credit, self.turn) {
            (Some(credit), true) => {
                self.turn = false;
                (Knob::Credit, credit.climb(rate))
            }
            (credit, _) => {
                self.turn = credit.is_some();
                (Knob::Reach, self.reach.climb(rate))
            }
        }
    }

    #[cfg(feature = "serde")]
    /// Appends the climber's state to `out`, for a cache's save, with `hits` the shard's
    /// lock's count (little-endian: the hits and misses of the sample so far, then the last
    /// hit ratio and the step as `f64` bits; from version 6 the credit's two, 0 and 0
    /// without one, and whether the credit moves next).
    pub(crate) fn save(&self, hits: u64, out: &mut Vec<u8>) {
        let (sampled, misses) = self.counts(hits);
        let credit = self.credit.unwrap_or(Hill { previous: 0.0, step: 0.0 });
        for field in [
            sampled,
            misses,
            self.reach.previous.to_bits(),
            self.reach.step.to_bits(),
            credit.previous.to_bits(),
            credit.step.to_bits(),
            u64::from(self.turn),
        ] {
            out.extend_from_slice(&field.to_le_bytes());
        }
    }

    #[cfg(feature = "serde")]
    /// Reads what [`Climber::save`] wrote, for a shard whose lock has counted `hits` and
    /// whose ghosts remember `keys` keys at full reach, with a credit if `credit`; an
    /// error if a field is out of range. Before version 6 the credit starts afresh.
    pub(crate) fn restore<R: std::io::Read + ?Sized>(
        d: &mut crate::snapshot::Decoder<'_, R>,
        hits: u64,
        keys: usize,
        credit: bool,
    ) -> Result<Self, crate::snapshot::SnapshotError> {
        let (sampled, misses) = (d.u64()?, d.u64()?);
        let reach = Hill::restore(d)?;
        let (saved, turn) = if d.version() >= 6 { (Some(Hill::restore(d)?), d.u64()? == 1) } else { (None, false) };
        // Counts past 2^62 come from no sample (and could overflow as requests are added).
        if sampled.max(misses) > 1 << 62 {
            return Err(crate::snapshot::SnapshotError::inconsistent("cache climber"));
        }
        let fresh = Climber::new(hits, keys, credit);
        // A saved credit without a step was saved without one (another policy).
        let credit = match (fresh.credit, saved) {
            (Some(_), Some(saved)) if saved.step != 0.0 => Some(saved),
            (fresh, _) => fresh,
        };
        // The sample so far counts on: it began `sampled` hits ago, and its misses brought
        // its end closer (a sample already over ends at the next miss).
        let (start, left) = (hits.wrapping_sub(sampled), fresh.sample.saturating_sub(misses).max(1));
        Ok(Climber { start, left, reach, turn: turn && credit.is_some(), credit, ..fresh })
    }
}

#[cfg(all(test, not(cuckoo_gate_loom)))]
mod tests {
    use super::{Climber, Knob, MIN_SAMPLE, RESTART, SAMPLE, STEP};

    /// Runs one sample of the climber's requests at hit ratio `rate`; the move it makes.
    fn sample(climber: &mut Climber, hits: &mut u64, rate: f64) -> f64 {
        let requests = climber.sample;
        let (hit_count, misses) =
            ((requests as f64 * rate) as u64, requests - (requests as f64 * rate) as u64);
        *hits += hit_count;
        for _ in 1..misses {
            assert_eq!(climber.miss(*hits), None, "no move within a sample");
        }
        climber.miss(*hits).expect("a move at the sample's end").1
    }

    #[test]
    fn it_keeps_its_direction_while_the_hit_ratio_rises_and_turns_when_it_falls() {
        assert_eq!(Climber::new(0, 10, false).sample, MIN_SAMPLE, "a small shard's sample");
        let (mut climber, mut hits) = (Climber::new(7, 200, false), 7);
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

    #[test]
    fn with_a_credit_samples_move_the_knobs_in_turn() {
        let (mut climber, mut hits) = (Climber::new(0, 200, true), 0);
        let turns: Vec<Knob> = (0..4)
            .map(|_| {
                hits += 1_000;
                (1..1_000).for_each(|_| assert_eq!(climber.miss(hits), None));
                climber.miss(hits).expect("a move").0
            })
            .collect();
        assert_eq!(turns, [Knob::Reach, Knob::Credit, Knob::Reach, Knob::Credit]);
    }
}
