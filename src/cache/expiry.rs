//! Expiry: the clock, a cache's lifetimes, and the column of deadlines beside a shard's
//! entries.
//!
//! Time is counted in ticks of 2^-32 seconds (about 0.23 ns; a `u64` of them spans 136
//! years) since an arbitrary start. The system clock is the kernel's coarse monotonic
//! clock (`CLOCK_MONOTONIC_COARSE` on Linux, read through the `coarsetime` crate, which
//! knows each platform's cheapest monotonic clock), updated every 1 to 4 ms. While a cache
//! with expiry is alive, one process-wide thread reads it every millisecond into an atomic
//! that lookups load (one load, where reading the clock costs a call and a few
//! nanoseconds); with no such thread, lookups read the clock themselves. An entry may so
//! outlive its deadline by a few milliseconds, by the kernel's clock; it is never returned
//! after. The ticker stops when the last cache that started it is dropped.
//!
//! Each entry has one deadline (`u64` ticks, [`NEVER`] for none), in a column beside the
//! store's slots that a shard allocates when it first stores an entry with a lifetime: a
//! cache without expiry holds no column and pays one branch per lookup for it. Under
//! time to idle a hit moves the deadline on, capped by the entry's time to live, which a
//! second column holds when both are in play.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::primitive::{AtomicU64, Ordering, StaticAtomicU64};

/// A deadline that never comes.
pub(crate) const NEVER: u64 = u64::MAX;

/// Ticks per second.
const TICKS_PER_SEC: u64 = 1 << 32;

/// `duration` in ticks, saturating at [`NEVER`].
pub(crate) fn ticks(duration: Duration) -> u64 {
    let fraction = (u64::from(duration.subsec_nanos()) << 32) / 1_000_000_000;
    duration
        .as_secs()
        .checked_mul(TICKS_PER_SEC)
        .and_then(|whole| whole.checked_add(fraction))
        .unwrap_or(NEVER)
}

/// How long one entry lives, how much of that it is fresh, and how long it is kept past
/// its end for a loader whose load fails: what an
/// [`expire_after`](super::AdmissionCacheBuilder::expire_after) closure returns for each
/// value written.
///
/// * **Time to live**: after it the entry is gone for [`get`](super::AdmissionCache::get),
///   `peek`, `iter` and every hit count; a loader loads it anew.
/// * **Fresh for** (stale-while-revalidate): past it, and before the time to live ends, a
///   loader that finds the entry returns it at once and one reload of the key starts.
/// * **Grace** (stale-if-error): the entry is kept this long past its time to live; a
///   loader that finds it loads anew, and gets this old value if that load fails.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use cuckoo_gate::Lifetime;
///
/// // `Cache-Control: max-age=60, stale-while-revalidate=30, stale-if-error=600`:
/// let http = Lifetime::http(Duration::from_secs(60), Duration::from_secs(30), Duration::from_secs(600));
/// let by_hand = Lifetime::ttl(Duration::from_secs(90))
///     .fresh_for(Duration::from_secs(60))
///     .grace(Duration::from_secs(600));
/// assert_eq!(http, by_hand);
/// assert_eq!(Lifetime::forever().fresh_for(Duration::from_secs(5)).time_to_live(), None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Lifetime {
    ttl: Option<Duration>,
    fresh: Option<Duration>,
    grace: Option<Duration>,
}

impl Lifetime {
    /// No deadline: fresh, and alive, until evicted or removed.
    pub const fn forever() -> Self {
        Lifetime { ttl: None, fresh: None, grace: None }
    }

    /// Lives `ttl` from its write, fresh all along, with no grace.
    pub const fn ttl(ttl: Duration) -> Self {
        Lifetime { ttl: Some(ttl), fresh: None, grace: None }
    }

    /// Fresh for `fresh` from its write, then stale until its time to live ends (fresh
    /// all along if `fresh` is as long).
    #[must_use]
    pub const fn fresh_for(self, fresh: Duration) -> Self {
        Lifetime { fresh: Some(fresh), ..self }
    }

    /// Kept `grace` past its time to live, for a loader whose load fails (an entry without
    /// a time to live is never in grace).
    #[must_use]
    pub const fn grace(self, grace: Duration) -> Self {
        Lifetime { grace: Some(grace), ..self }
    }

    /// HTTP's `Cache-Control` (RFC 9111, RFC 5861): fresh for `max_age`, then served stale
    /// while it is revalidated for `stale_while_revalidate` more, then kept
    /// `stale_if_error` for a failing origin.
    pub fn http(max_age: Duration, stale_while_revalidate: Duration, stale_if_error: Duration) -> Self {
        Lifetime::ttl(max_age.saturating_add(stale_while_revalidate)).fresh_for(max_age).grace(stale_if_error)
    }

    /// The time to live, if any.
    pub const fn time_to_live(&self) -> Option<Duration> {
        self.ttl
    }

    /// How long it is fresh, if less than its whole life.
    pub const fn freshness(&self) -> Option<Duration> {
        self.fresh
    }

    /// Its grace past the time to live, if any.
    pub const fn grace_period(&self) -> Option<Duration> {
        self.grace
    }

    /// In ticks.
    pub(crate) fn span(&self) -> Span {
        Span {
            ttl: self.ttl.map_or(NEVER, ticks),
            fresh: self.fresh.map_or(NEVER, ticks),
            grace: self.grace.map_or(0, ticks),
        }
    }
}

/// A [`Lifetime`] in ticks: its time to live ([`NEVER`] for none), how long of it the entry
/// is fresh ([`NEVER`] for all of it), and its grace (0 for none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) ttl: u64,
    pub(crate) fresh: u64,
    pub(crate) grace: u64,
}

impl Span {
    /// Whether an entry written with this span needs the windows beside its deadline.
    #[inline]
    pub(crate) fn windowed(&self) -> bool {
        self.fresh < self.ttl || self.grace != 0
    }
}

/// A length of ticks in 32 bits, as a float: 26 bits of mantissa, and the shift in the top
/// 6 (within 2^-26 of the length; a length of a day is exact to about 2 ms).
fn encode(ticks: u64, round_up: bool) -> u32 {
    let shift = (64 - ticks.leading_zeros()).saturating_sub(MANTISSA);
    let mut mantissa = ticks >> shift;
    let mut shift = shift;
    if round_up && mantissa << shift < ticks {
        mantissa += 1;
        if mantissa == 1 << MANTISSA {
            (mantissa, shift) = (1 << (MANTISSA - 1), shift + 1);
        }
    }
    if shift > 64 - MANTISSA {
        // Past 2^64 - 2^38 ticks (the end of time, give or take a minute): the longest.
        (mantissa, shift) = ((1 << MANTISSA) - 1, 64 - MANTISSA);
    }
    (shift << MANTISSA) | mantissa as u32
}

/// The length [`encode`] encoded (its shift is at most 38, so nothing is shifted out).
#[inline]
fn decode(code: u32) -> u64 {
    u64::from(code & ((1 << MANTISSA) - 1)) << (code >> MANTISSA)
}

/// Bits of mantissa in an encoded length.
const MANTISSA: u32 = 26;

/// The time a cache's expiry is measured by: the system's coarse monotonic clock, or a
/// [`ManualClock`] that tests move by hand.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use cuckoo_gate::{AdmissionCache, Clock};
///
/// let (clock, hand) = Clock::manual();
/// let cache: AdmissionCache<u64, u64> =
///     AdmissionCache::builder().capacity(100).time_to_live(Duration::from_secs(60)).clock(clock).build()?;
/// cache.insert(1, 1);
/// hand.advance(Duration::from_secs(59));
/// assert_eq!(cache.get(&1), Some(1));
/// hand.advance(Duration::from_secs(1));
/// assert_eq!(cache.get(&1), None); // expired: a miss
/// # Ok::<(), cuckoo_gate::BuildError>(())
/// ```
#[derive(Clone)]
#[repr(C)]
pub struct Clock {
    /// The time, in ticks: the ticker's reading (0 while no ticker runs, when [`Clock::now`]
    /// reads the system's clock itself), or a manual clock's, which starts at 1.
    ticks: Arc<StaticAtomicU64>,
    manual: bool,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

impl Clock {
    /// The system's coarse monotonic clock (the default).
    pub fn system() -> Self {
        Clock { ticks: RECENT.get_or_init(Arc::default).clone(), manual: false }
    }

    /// A clock that stands still until its [`ManualClock`] advances it.
    pub fn manual() -> (Self, ManualClock) {
        let ticks = Arc::new(StaticAtomicU64::new(1));
        (Clock { ticks: ticks.clone(), manual: true }, ManualClock { ticks, moved: Arc::default() })
    }

    /// Now, in ticks.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        match self.ticked() {
            0 => coarse_now(),
            now => now,
        }
    }

    /// Now, in ticks, as the ticker (or the manual hand) last set it; 0 while no ticker
    /// runs, when [`Clock::now`] reads the system's clock.
    #[inline]
    fn ticked(&self) -> u64 {
        self.ticks.load(Ordering::Acquire)
    }

    /// The wall-clock time in milliseconds since 1970, for a saved cache's lifetimes: the
    /// system's, or for a manual clock its own (a fixed start, moved as its ticks are).
    #[cfg(feature = "serde")]
    pub(crate) fn wall_millis(&self) -> u64 {
        if self.manual {
            const START: u64 = 1_700_000_000_000;
            return START + ((u128::from(self.ticks.load(Ordering::Acquire)) * 1000) >> 32) as u64;
        }
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.map_or(0, |since| since.as_millis() as u64)
    }

    /// Keeps the ticker running while the returned hold lives (a manual clock needs none).
    fn hold(&self) -> Option<TickerHold> {
        (!self.manual).then(TickerHold::new)
    }
}

/// The system's coarse monotonic clock, in ticks (never 0).
fn coarse_now() -> u64 {
    coarsetime::Instant::now_without_cache_update().as_ticks().max(1)
}

/// The ticker's last reading of [`coarse_now`]; 0 while no ticker runs.
static RECENT: OnceLock<Arc<StaticAtomicU64>> = OnceLock::new();

/// The ticker's reading.
fn recent() -> &'static StaticAtomicU64 {
    RECENT.get_or_init(Arc::default)
}

/// How often the ticker reads the clock.
const TICK: Duration = Duration::from_millis(1);

/// Caches holding the ticker, and whether its thread runs.
static TICKER: Mutex<(usize, bool)> = Mutex::new((0, false));

/// A cache's hold on the ticker.
#[derive(Debug)]
struct TickerHold;

impl TickerHold {
    fn new() -> Self {
        let mut ticker = TICKER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        ticker.0 += 1;
        if !ticker.1 {
            recent().store(coarse_now(), Ordering::Relaxed);
            let spawned = std::thread::Builder::new().name("cuckoo-gate-clock".into()).spawn(tick);
            // Without the thread (a process out of threads), lookups read the clock.
            ticker.1 = spawned.is_ok();
            if !ticker.1 {
                recent().store(0, Ordering::Relaxed);
            }
        }
        TickerHold
    }
}

impl Drop for TickerHold {
    fn drop(&mut self) {
        TICKER.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0 -= 1;
    }
}

/// The ticker's thread: reads the clock every [`TICK`] while any cache holds it.
fn tick() {
    loop {
        std::thread::sleep(TICK);
        let mut ticker = TICKER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if ticker.0 == 0 {
            ticker.1 = false;
            recent().store(0, Ordering::Relaxed);
            return;
        }
        recent().store(coarse_now(), Ordering::Relaxed);
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.manual { "Clock::manual" } else { "Clock::system" })
    }
}

/// The hand of a [`Clock::manual`]: moves its time forward.
#[derive(Clone, Debug)]
pub struct ManualClock {
    ticks: Arc<StaticAtomicU64>,
    /// How far the hand has moved the clock, exactly: the ticks are worked out from the
    /// sum, so that no split of a duration loses the rounding of each part.
    moved: Arc<std::sync::Mutex<Duration>>,
}

impl ManualClock {
    /// Moves the clock forward by `by`, stopping just short of the end of time (about 136
    /// years from its start), which no deadline reaches: an entry without a lifetime
    /// never expires, however far the clock is moved. The clock counts in ticks of 2^-32 s
    /// (about 0.23 ns), but the hand keeps the exact sum of its moves: 59.999 s and then
    /// 1 ms is 60 s.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use cuckoo_gate::{AdmissionCache, Clock};
    ///
    /// let (clock, hand) = Clock::manual();
    /// let cache: AdmissionCache<u64, u64> =
    ///     AdmissionCache::builder().capacity(10).time_to_live(Duration::from_secs(60)).clock(clock).build()?;
    /// let _ = cache.insert(1, 1);
    /// hand.advance(Duration::from_millis(59_999));
    /// assert_eq!(cache.get(&1), Some(1));
    /// hand.advance(Duration::from_millis(1));
    /// assert_eq!(cache.get(&1), None); // 60 s to the tick
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn advance(&self, by: Duration) {
        let mut moved = self.moved.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *moved = moved.saturating_add(by);
        self.ticks.store(ticks(*moved).saturating_add(1).min(NEVER - 1), Ordering::Release);
    }
}

/// A cache's lifetimes, and its clock.
#[derive(Debug)]
pub(crate) struct Expiry {
    pub(crate) clock: Clock,
    /// The lifetime of an entry written without one of its own: the time to live
    /// ([`NEVER`] for none), freshness and grace, in ticks.
    pub(crate) default: Span,
    /// Time to idle from each write and hit, in ticks (0 for none).
    pub(crate) tti: u64,
    /// Whether every write gives its entry a deadline (a default lifetime, a time to idle,
    /// or a lifetime computed per entry).
    timed: bool,
    /// The cache's hold on the ticker, taken when it is built with a lifetime or first
    /// given an entry with one.
    ticker: OnceLock<Option<TickerHold>>,
}

impl Expiry {
    /// The expiry of a cache built with these settings (`per_entry` if a closure gives
    /// each entry its lifetime).
    pub(crate) fn new(clock: Clock, default: Lifetime, tti: Option<Duration>, per_entry: bool) -> Self {
        let default = default.span();
        let tti = tti.map_or(0, |tti| ticks(tti).max(1));
        let timed = per_entry || tti != 0 || default.ttl != NEVER || default.windowed();
        let expiry = Expiry { clock, default, tti, timed, ticker: OnceLock::new() };
        if expiry.by_default() {
            expiry.start();
        }
        expiry
    }

    /// Readies the cache for entries with deadlines: the clock ticks from now on.
    #[inline]
    pub(crate) fn start(&self) {
        if self.ticker.get().is_none() {
            self.ticker.get_or_init(|| self.clock.hold());
        }
    }

    /// Whether any entry may have a deadline: the ticker runs from the first lifetime the
    /// cache was built with or given (an entry's, or one a restore brought back), and a
    /// write on a cache that never had one tests nothing else of expiry.
    #[inline]
    pub(crate) fn started(&self) -> bool {
        self.ticker.get().is_some()
    }

    /// Whether entries get a deadline without being given a lifetime of their own.
    #[inline]
    pub(crate) fn by_default(&self) -> bool {
        self.timed
    }
}

/// The deadlines of a store's slots.
///
/// Laid out so that what a lookup and the common write read shares one cache line (the
/// first, `align(64)`): the plain lifetime, the column's pointer and length, the sweep's
/// two bounds, the lookups' bound and the clock's reading. Each shard has its own, and
/// between two requests to a shard others evict its lines: the fewer, the fewer misses.
#[repr(C, align(64))]
pub(crate) struct Deadlines {
    /// The cache's default time to live, while an entry given the cache's lifetime needs
    /// nothing in the column but its deadline (a time to live, no time to idle, no stale
    /// window or grace in the default lifetime, no windows in the column yet): such a
    /// write stores its time plus this. [`NEVER`] otherwise.
    plain: u64,
    /// When each slot's entry stops being fresh: its deadline, or, for an entry with a
    /// stale window, the start of that window (its deadline is then the window's end), so
    /// that a fresh entry is told by one load whether a `get` or a loader looks.
    at: Vec<AtomicU64>,
    /// The earliest deadline seen since the sweep last started over from slot 0 (or set
    /// since): `earliest` when the sweep next starts over.
    pass_earliest: u64,
    /// No deadline in the column is earlier: until then the sweep has nothing to find.
    earliest: u64,
    /// Before this a lookup has nothing to do: `earliest`, or 0 under time to idle,
    /// where a hit moves its entry's deadline on.
    lookup_from: u64,
    /// The cache's clock and time to idle (0 if none), so that a lookup needs nothing
    /// beyond the column to check a deadline. The clock's reading (its first field) ends
    /// the first line.
    clock: Clock,
    tti: u64,
    /// Under time to idle, each slot's time-to-live cap, which hits do not move.
    caps: Option<Vec<u64>>,
    /// Where [`Deadlines::next_expired`] looks next.
    cursor: usize,
    /// Each slot's stale window and grace, once the store has held an entry with either.
    windows: Option<Box<Windows>>,
}

/// Beside each slot's time in `at` (when its entry stops being fresh): how long after it
/// the entry expires (its stale window), and how long after that it is kept in grace, each
/// a length of ticks in 32 bits ([`encode`]; 0 for none). Both are rounded down: an entry
/// expires, and leaves its grace, a little early, never late.
#[derive(Default)]
struct Windows {
    stale: Vec<u32>,
    grace: Vec<u32>,
}

impl Windows {
    /// Sets `slot`'s length in `lengths`, which holds none past its end (and is lengthened
    /// only for a length other than 0, to `room` slots when it must grow: the deadlines'
    /// own room, so that the two grow in step).
    fn set(lengths: &mut Vec<u32>, slot: usize, code: u32, room: usize) {
        match lengths.get_mut(slot) {
            Some(length) => *length = code,
            None if code == 0 => {}
            None => {
                lengths.reserve_exact(room.max(slot + 1) - lengths.len());
                lengths.resize(slot + 1, 0);
                lengths[slot] = code;
            }
        }
    }
}

/// Where an entry stands at a moment: what a loader does with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Before its freshness ends: a hit.
    Fresh,
    /// Past its freshness, before its deadline: served, and reloaded.
    Stale,
    /// Past its deadline (in grace, or not yet reclaimed): a miss.
    Expired,
}

impl Deadlines {
    /// A column for `slots` slots, all without a deadline, kept by `expiry`'s clock (with
    /// caps under time to idle).
    pub(crate) fn new(slots: usize, expiry: &Expiry) -> Self {
        let idle = expiry.tti != 0;
        Deadlines {
            clock: expiry.clock.clone(),
            tti: expiry.tti,
            at: (0..slots).map(|_| AtomicU64::new(NEVER)).collect(),
            caps: idle.then(|| vec![NEVER; slots]),
            cursor: 0,
            earliest: NEVER,
            lookup_from: if idle { 0 } else { NEVER },
            pass_earliest: NEVER,
            windows: None,
            plain: if idle || expiry.default.windowed() { NEVER } else { expiry.default.ttl },
        }
    }

    /// The stale window of the entry in `slot` (0 for none): its deadline is its time in
    /// `at` plus this.
    #[inline]
    fn window(&self, slot: u32) -> u64 {
        self.windows
            .as_ref()
            .and_then(|windows| windows.stale.get(slot as usize))
            .map_or(0, |&code| decode(code))
    }

    /// Whether the entry in `slot` has expired at `now` and left its grace: whether it
    /// may be reclaimed (an entry in grace is expired for lookups, and kept for loaders).
    #[inline]
    pub(crate) fn reclaimable(&self, slot: u32, now: u64) -> bool {
        self.expired(slot, now)
            && self.windows.as_ref().map_or(true, |windows| {
                let grace = windows.grace.get(slot as usize).map_or(0, |&code| decode(code));
                let at = self.at[slot as usize].load(Ordering::Relaxed);
                at.saturating_add(self.window(slot)).saturating_add(grace) <= now
            })
    }

    /// Where the entry in `slot` stands at `now` (for a loader: its time to idle is not
    /// moved).
    #[inline]
    pub(crate) fn standing(&self, slot: u32, now: u64) -> Standing {
        // A slot past the column's end has never had a deadline.
        match self.at.get(slot as usize).map_or(NEVER, |at| at.load(Ordering::Relaxed)) {
            at if at > now => Standing::Fresh,
            at if at.saturating_add(self.window(slot)) > now => Standing::Stale,
            _ => Standing::Expired,
        }
    }

    /// Where the entry in the slot that `slot` gives stands now, for a loader's hit (which
    /// moves an idle deadline on, as [`Deadlines::live_lazy`]'s does): before the column's
    /// earliest time every entry is fresh, and a fresh one costs one load.
    #[inline(always)]
    pub(crate) fn look_lazy(&self, slot: impl Fn() -> u32) -> Standing {
        match self.clock.ticked() {
            0 => self.look_unticked(slot()),
            now if now < self.lookup_from => Standing::Fresh,
            now => self.look_at(slot(), now),
        }
    }

    /// [`Deadlines::look_lazy`] while no ticker runs (see [`Deadlines::live_unticked`]).
    #[cold]
    #[inline(never)]
    fn look_unticked(&self, slot: u32) -> Standing {
        self.look_at(slot, coarse_now())
    }

    /// [`Deadlines::look_lazy`] past the bound, out of line: the entry's time, and under
    /// time to idle its move.
    #[inline(never)]
    fn look_at(&self, slot: u32, now: u64) -> Standing {
        let standing = self.standing(slot, now);
        if self.tti != 0 && standing != Standing::Expired {
            self.touch(slot, now, self.tti);
        }
        standing
    }

    #[cfg(feature = "serde")]
    /// The entry in `slot`'s deadline, stale window and grace, in ticks: `None` if it has
    /// no deadline.
    pub(crate) fn span_of(&self, slot: u32) -> Option<(u64, u64, u64)> {
        let at = self.at.get(slot as usize)?.load(Ordering::Relaxed);
        if at == NEVER {
            return None;
        }
        let length = |lengths: &Vec<u32>| lengths.get(slot as usize).map_or(0, |&code| decode(code));
        let (window, grace) = self.windows.as_ref().map_or((0, 0), |w| (length(&w.stale), length(&w.grace)));
        Some((at.saturating_add(window), window, grace))
    }

    /// The time, for a loader's look at a slot.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.clock.now()
    }

    /// Gives `slot`'s entry, written at `now`, `span`'s lifetime: its deadline, and its
    /// stale window and grace (made the first time an entry has either). Under time to
    /// idle an entry has neither: its deadline moves with its hits. Inline for a plain
    /// lifetime, the common case, which is a store and a compare.
    #[inline(always)]
    pub(crate) fn set_span(&mut self, slot: u32, now: u64, span: Span) {
        if self.tti != 0 || !(span.windowed() || self.windows.is_some()) {
            self.set_lifetime(slot, now, span.ttl);
        } else {
            self.set_windowed(slot, now, span);
        }
    }

    /// Gives `slot`'s entry, written at `now`, the cache's lifetime if a deadline is all
    /// the column keeps of it and `slot` lies within the column: the common write's whole
    /// work. Returns whether it did.
    #[inline(always)]
    pub(crate) fn put_plain(&mut self, slot: u32, now: u64) -> bool {
        if self.plain == NEVER || self.beyond(slot) {
            return false;
        }
        self.put(slot as usize, now.saturating_add(self.plain));
        true
    }

    /// [`Deadlines::set_span`] for an entry with a stale window or grace, or in a column
    /// that holds some.
    #[inline(never)]
    fn set_windowed(&mut self, slot: u32, now: u64, span: Span) {
        let deadline = now.saturating_add(span.ttl);
        let fresh_until = now.saturating_add(span.fresh).min(deadline);
        // Rounded down: the deadline the column keeps is at or before the true one.
        let window = encode(deadline - fresh_until, false);
        let grace = if span.ttl == NEVER { 0 } else { span.grace };
        self.put(slot as usize, fresh_until);
        let room = self.at.capacity();
        self.plain = NEVER;
        let windows = self.windows.get_or_insert_with(Box::default);
        Windows::set(&mut windows.stale, slot as usize, window, room);
        Windows::set(&mut windows.grace, slot as usize, encode(grace, false), room);
    }

    /// Whether the entry in `slot` has expired at `now`. Before the column's earliest
    /// time nothing has, and the slot's time is not read (a cache miss saved on every
    /// lookup and every entry eviction passes over); an entry past its time but within its
    /// stale window is live.
    #[inline]
    pub(crate) fn expired(&self, slot: u32, now: u64) -> bool {
        // A slot past the column's end has never had a deadline.
        self.sweeping(now)
            && self.at.get(slot as usize).is_some_and(|at| {
                let at = at.load(Ordering::Relaxed);
                at <= now && (self.windows.is_none() || at.saturating_add(self.window(slot)) <= now)
            })
    }

    /// Whether the entry in `slot` is live now; a `hit` on it moves an idle deadline on.
    #[inline(always)]
    pub(crate) fn live(&self, slot: u32, hit: bool) -> bool {
        self.live_lazy(|| slot, hit)
    }

    /// [`Deadlines::live`] for the slot that `slot` gives, called only if the answer
    /// needs it: before the column's earliest deadline, a lookup without time to idle
    /// reads nothing but the time and that bound.
    #[inline(always)]
    pub(crate) fn live_lazy(&self, slot: impl Fn() -> u32, hit: bool) -> bool {
        match self.clock.ticked() {
            0 => self.live_unticked(slot(), hit),
            now => self.live_at(slot, hit, now),
        }
    }

    /// [`Deadlines::live`] while no ticker runs: the clock read is a call, out of line
    /// with all that needs its result, so that a lookup keeps nothing across it.
    #[cold]
    #[inline(never)]
    fn live_unticked(&self, slot: u32, hit: bool) -> bool {
        self.live_at(|| slot, hit, coarse_now())
    }

    #[inline(always)]
    fn live_at(&self, slot: impl Fn() -> u32, hit: bool, now: u64) -> bool {
        now < self.lookup_from || self.live_past(slot(), hit, now)
    }

    /// [`Deadlines::live_at`] past the bound, out of line: a lookup inlines only the bound.
    #[inline(never)]
    fn live_past(&self, slot: u32, hit: bool, now: u64) -> bool {
        if self.expired(slot, now) {
            return false;
        }
        if hit && self.tti != 0 {
            self.touch(slot, now, self.tti);
        }
        true
    }

    /// Gives `slot`'s entry, written at `now`, `lifetime` ticks to live: its deadline,
    /// and under time to idle its cap.
    #[inline(always)]
    pub(crate) fn set_lifetime(&mut self, slot: u32, now: u64, lifetime: u64) {
        let cap = now.saturating_add(lifetime);
        match self.tti {
            0 => self.put(slot as usize, cap),
            tti => self.set(slot, (now.saturating_add(tti).min(cap), cap)),
        }
    }

    /// Sets `slot`'s deadline and cap (growing the column to reach it).
    #[inline]
    fn set(&mut self, slot: u32, (deadline, cap): (u64, u64)) {
        self.put(slot as usize, deadline);
        if let Some(caps) = &mut self.caps {
            caps[slot as usize] = cap;
        }
    }

    /// Sets `slot`'s deadline (growing the column to reach it), and lowers the bounds
    /// it comes before.
    #[inline(always)]
    fn put(&mut self, slot: usize, deadline: u64) {
        match self.at.get(slot) {
            Some(at) => at.store(deadline, Ordering::Relaxed),
            None => self.grow(slot, deadline),
        }
        // `earliest <= pass_earliest` always (a pass sees only deadlines at or after
        // `earliest`), so a deadline no earlier than `pass_earliest`, as a fixed lifetime
        // gives, lowers neither.
        if deadline < self.pass_earliest {
            self.pass_earliest = deadline;
            self.set_earliest(self.earliest.min(deadline));
        }
    }

    /// Moves the earliest-deadline bound, and the lookups' with it (under time to idle a
    /// lookup always looks: a hit moves its deadline on).
    fn set_earliest(&mut self, earliest: u64) {
        self.earliest = earliest;
        if self.tti == 0 {
            self.lookup_from = earliest;
        }
    }

    /// Lengthens the column (and the caps), the new slots without a deadline, to reach
    /// `slot` and a sixteenth more, within `room` slots: the store's slab's room (which it
    /// reserves at once), so that the column grows with the slab, not past it, and holds
    /// the slots the slab has used, give or take a sixteenth.
    #[cold]
    #[inline(never)]
    pub(crate) fn fit(&mut self, slot: u32, room: usize) {
        let len = self.at.len();
        let slots = (len + len / 16).min(room).max(slot as usize + 1);
        self.at.reserve_exact(room.saturating_sub(len));
        self.at.resize_with(slots, || AtomicU64::new(NEVER));
        if let Some(caps) = &mut self.caps {
            caps.reserve_exact(room.saturating_sub(caps.len()));
            caps.resize(slots, NEVER);
        }
    }

    /// Whether `slot` lies past the column's end.
    #[inline]
    pub(crate) fn beyond(&self, slot: u32) -> bool {
        slot as usize >= self.at.len()
    }

    /// Lengthens the column (and the caps) to reach `slot`, all without a deadline but
    /// `slot`, which gets `deadline`.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, slot: usize, deadline: u64) {
        self.at.resize_with(slot + 1, || AtomicU64::new(NEVER));
        self.at[slot].store(deadline, Ordering::Relaxed);
        if let Some(caps) = &mut self.caps {
            caps.resize(slot + 1, NEVER);
        }
    }

    /// A hit at `now` on `slot`'s entry, under time to idle of `tti` ticks: moves its
    /// deadline on, within its cap. A reader's store, under the shard's read lock; skipped
    /// while the deadline would move by less than 1/64 of the idle time, so that a hot
    /// entry's line is not written on every hit (it may so expire up to 1/64 of its idle
    /// time early).
    #[inline]
    pub(crate) fn touch(&self, slot: u32, now: u64, tti: u64) {
        let slot = slot as usize;
        let cap = self.caps.as_ref().map_or(NEVER, |caps| caps[slot]);
        let deadline = now.saturating_add(tti).min(cap);
        let at = &self.at[slot];
        if deadline.saturating_sub(at.load(Ordering::Relaxed)) > tti >> 6 {
            at.store(deadline, Ordering::Relaxed);
        }
    }

    /// Clears the deadline of a slot a new entry takes. A slot keeps the deadline of the
    /// entry that left it until then (or until the sweep finds it free), so that an
    /// eviction writes no line of the column: only the write that fills the slot does,
    /// the line its own deadline goes to.
    #[inline]
    pub(crate) fn reset(&mut self, slot: u32) {
        if let Some(at) = self.at.get(slot as usize) {
            at.store(NEVER, Ordering::Relaxed);
        }
        // A plain column has no windows (the first window ends the plain writes).
        if self.plain != NEVER {
            return;
        }
        if let Some(windows) = &mut self.windows {
            Windows::set(&mut windows.stale, slot as usize, 0, 0);
            Windows::set(&mut windows.grace, slot as usize, 0, 0);
        }
    }

    /// Whether a deadline in the column may have passed at `now` (none has before the
    /// earliest).
    #[inline(always)]
    pub(crate) fn sweeping(&self, now: u64) -> bool {
        now >= self.earliest
    }

    /// The next slot, among a few from where the last call stopped, whose entry expired at
    /// `now`: the bounded sweep each write makes. Nothing to do before the earliest
    /// deadline; each time the sweep starts over, the earliest deadline of its last pass
    /// becomes the new bound. A passed deadline of a slot that is `free` (whose entry
    /// left) is cleared, not returned.
    #[inline(always)]
    pub(crate) fn next_expired(&mut self, now: u64, free: impl Fn(u32) -> bool) -> Option<u32> {
        if !self.sweeping(now) {
            return None;
        }
        self.sweep(now, free)
    }

    /// [`Deadlines::next_expired`] past the earliest deadline, out of line.
    #[inline(never)]
    fn sweep(&mut self, now: u64, free: impl Fn(u32) -> bool) -> Option<u32> {
        let len = self.at.len();
        for _ in 0..len.min(SWEEP) {
            self.cursor += 1;
            if self.cursor >= len {
                self.cursor = 0;
                self.set_earliest(self.pass_earliest);
                self.pass_earliest = NEVER;
            }
            let deadline = self.at[self.cursor].load(Ordering::Relaxed);
            if deadline <= now && free(self.cursor as u32) {
                // The deadline of an entry that left: it bounds nothing.
                self.reset(self.cursor as u32);
                continue;
            }
            // Counted even when found expired: the caller may keep the entry (the one it
            // just stored), and the bound must stay at or below every deadline held.
            self.pass_earliest = self.pass_earliest.min(deadline);
            if deadline <= now && self.reclaimable(self.cursor as u32, now) {
                return Some(self.cursor as u32);
            }
        }
        None
    }
}

/// Slots each write looks at for an expired entry to reclaim: with evictions taking
/// expired entries first, enough that expired entries hold a small share of an idle
/// stretch's capacity (see `docs/performance.md`).
const SWEEP: usize = 2;

#[cfg(all(test, not(cuckoo_gate_loom)))]
mod tests {
    use std::time::Duration;

    use super::{recent, ticks, Clock, Deadlines, Expiry, Lifetime, Ordering, NEVER};

    #[test]
    fn durations_become_ticks_and_saturate() {
        assert_eq!(ticks(Duration::from_secs(1)), 1 << 32);
        assert_eq!(ticks(Duration::from_millis(500)), 1 << 31);
        assert_eq!(ticks(Duration::MAX), NEVER);
        assert_eq!(ticks(Duration::ZERO), 0);
    }

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let (clock, hand) = Clock::manual();
        assert_eq!(clock.now(), 1);
        hand.advance(Duration::from_secs(2));
        assert_eq!(clock.now(), (2 << 32) + 1);
        hand.advance(Duration::MAX);
        assert_eq!(clock.now(), NEVER - 1, "short of the end of time, which never comes");
        let system = Clock::system();
        assert!(system.now() > 0 && system.now() <= Clock::system().now());
    }

    #[test]
    fn the_sweep_finds_every_expired_slot_and_skips_work_before_the_earliest_deadline() {
        let mut column = Deadlines::new(0, &Expiry::new(Clock::manual().0, Lifetime::forever(), None, false));
        (0..10).for_each(|slot| column.set(slot, (100 + u64::from(slot), NEVER)));
        let held = |_| false;
        assert_eq!(column.next_expired(99, held), None, "nothing can have expired");
        assert_eq!(column.cursor, 0, "and nothing was looked at");
        let mut found = Vec::new();
        for _ in 0..20 {
            if let Some(slot) = column.next_expired(105, held) {
                column.reset(slot);
                found.push(slot);
            }
        }
        found.sort_unstable();
        assert_eq!(found, [0, 1, 2, 3, 4, 5]);
        // A full pass has raised the bound to the earliest deadline left.
        (0..10).for_each(|_| assert_eq!(column.next_expired(105, held), None));
        assert_eq!(column.earliest, 106);
        // A deadline before the bound lowers it, for lookups and for the sweep.
        column.set(20, (50, NEVER));
        assert!(column.expired(20, 50) && !column.expired(20, 49));
        assert_eq!((0..21).find_map(|_| column.next_expired(50, held)), Some(20));
        // A free slot's passed deadline is cleared and not returned; the bound then
        // rises past it.
        column.set(21, (60, NEVER));
        let free = |slot| slot == 21;
        assert_eq!((0..22).find_map(|_| column.next_expired(200, free)), Some(6));
        assert_eq!(column.at[21].load(Ordering::Relaxed), NEVER);
    }

    #[test]
    fn a_lookup_and_a_plain_write_read_one_line_of_the_deadlines() {
        use std::mem::offset_of;
        assert_eq!(align_of::<Deadlines>(), 64);
        assert_eq!(offset_of!(Clock, ticks), 0, "the clock's reading comes first");
        let ends = [
            offset_of!(Deadlines, plain) + 8,
            offset_of!(Deadlines, at) + size_of::<Vec<super::AtomicU64>>(),
            offset_of!(Deadlines, pass_earliest) + 8,
            offset_of!(Deadlines, earliest) + 8,
            offset_of!(Deadlines, lookup_from) + 8,
            offset_of!(Deadlines, clock) + 8,
        ];
        assert!(ends.iter().all(|&end| end <= 64), "{ends:?}");
    }

    #[test]
    fn the_column_grows_with_the_slab_and_a_plain_write_stores_one_deadline() {
        let ttl = Duration::from_secs(1);
        let mut column = Deadlines::new(0, &Expiry::new(Clock::manual().0, Lifetime::ttl(ttl), None, false));
        for slot in 0..1000 {
            if column.beyond(slot) {
                column.fit(slot, 1000);
            }
            assert!(!column.beyond(slot) && column.at.len() <= 1000, "within the slab's room");
            assert!(column.put_plain(slot, 5));
        }
        assert!(column.at.len() == 1000 && column.beyond(1000));
        assert!(!column.expired(999, 4 + ticks(ttl)) && column.expired(999, 5 + ticks(ttl)));
        // Once the column holds windows, a write's deadline is no longer all there is.
        column.set_span(3, 5, Lifetime::ttl(ttl).fresh_for(ttl / 2).span());
        assert!(!column.put_plain(4, 5));
        let idle = Expiry::new(Clock::manual().0, Lifetime::ttl(ttl), Some(ttl), false);
        assert!(!Deadlines::new(8, &idle).put_plain(0, 5), "time to idle keeps a cap too");
    }

    #[test]
    fn the_ticker_runs_while_a_cache_holds_it() {
        let expiry = Expiry::new(Clock::system(), Lifetime::ttl(Duration::from_secs(1)), None, false);
        let before = recent().load(Ordering::Relaxed);
        assert_ne!(before, 0, "lookups load the ticker's reading");
        std::thread::sleep(Duration::from_millis(20));
        assert!(recent().load(Ordering::Relaxed) > before, "the ticker moves it on");
        drop(expiry);
        let manual = Expiry::new(Clock::manual().0, Lifetime::ttl(Duration::from_secs(1)), None, false);
        assert!(manual.ticker.get().is_some_and(Option::is_none), "a manual clock needs no ticker");
    }

    #[test]
    fn without_a_ticker_lookups_read_the_system_clock() {
        let unticked = Clock { ticks: std::sync::Arc::default(), manual: false };
        let mut column = Deadlines::new(0, &Expiry::new(unticked, Lifetime::forever(), None, false));
        column.set(0, (1, NEVER));
        column.set(1, (NEVER - 1, NEVER));
        assert!(!column.live(0, true), "the system's clock is past tick 1");
        assert!(column.live(1, true));
    }

    #[test]
    fn idle_deadlines_move_on_within_their_cap() {
        let expiry = Expiry::new(
            Clock::system(),
            Lifetime::ttl(Duration::from_secs(10)),
            Some(Duration::from_secs(2)),
            false,
        );
        let (tti, ttl) = (2u64 << 32, 10u64 << 32);
        let mut column = Deadlines::new(0, &expiry);
        column.set_lifetime(3, 0, expiry.default.ttl);
        assert!(!column.expired(3, tti - 1) && column.expired(3, tti));
        column.touch(3, tti - 1, expiry.tti);
        assert!(!column.expired(3, 2 * tti - 2) && column.expired(3, 2 * tti - 1));
        column.touch(3, ttl - 1, expiry.tti);
        assert!(column.expired(3, ttl), "idling never outlives the time to live");
        // A small move is not written.
        column.set_lifetime(4, 0, expiry.default.ttl);
        column.touch(4, 1, expiry.tti);
        assert!(column.expired(4, tti));
    }
}
