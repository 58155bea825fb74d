//! The placement random source (B1, S5), pinned: every placement's random
//! value is `PoolCounters::placement_random`, a pure function of the pool's
//! stored seed and count of draws. Both are persisted, so these values are
//! part of the data format: an existing database (or a simulator seed) must
//! go on drawing exactly these numbers whatever dependency or platform the
//! broker is built with. The table was taken from the implementation over
//! `rand` 0.10's `SmallRng` (Xoshiro256++ on 64-bit) before placement had a
//! generator of its own, and that own generator must keep reproducing it.

use placement::PoolCounters;

fn counters(random_seed: u64, random_draws: u64) -> PoolCounters {
    PoolCounters {
        next_seq: 0,
        random_seed,
        random_draws,
        last_served_seq: 0,
    }
}

/// (seed, draws, the placement's random value). Seeds: zero, one, the test
/// pools' `SEED`, a small and a large arbitrary one, the constant the draw
/// count is multiplied by (so seed ^ draws * constant is 0 at draws = 1) and
/// all ones; draws: the first three, a later one, and the last.
const PINNED: [(u64, u64, u64); 35] = [
    (0x0, 0, 5_987_356_902_031_041_503),
    (0x0, 1, 6_409_272_458_699_751_175),
    (0x0, 2, 1_819_068_375_045_147_981),
    (0x0, 1000, 214_881_993_970_693_536),
    (0x0, u64::MAX, 10_106_082_660_461_011_502),
    (0x1, 0, 14_971_601_782_005_023_387),
    (0x1, 1, 13_022_637_563_981_439_720),
    (0x1, 2, 8_059_550_639_330_444_725),
    (0x1, 1000, 558_557_892_265_034_588),
    (0x1, u64::MAX, 15_682_366_355_837_959_586),
    (0x7, 0, 1_021_219_803_524_665_661),
    (0x7, 1, 9_867_939_117_503_989_964),
    (0x7, 2, 10_076_980_899_119_940_272),
    (0x7, 1000, 11_125_335_876_107_881_220),
    (0x7, u64::MAX, 15_895_372_192_485_120_193),
    (0x3039, 0, 10_201_931_350_592_234_856),
    (0x3039, 1, 16_618_551_969_089_801_746),
    (0x3039, 2, 4_465_964_984_520_668_606),
    (0x3039, 1000, 6_627_283_850_140_624_079),
    (0x3039, u64::MAX, 1_670_817_393_518_503_753),
    (0x9e37_79b9_7f4a_7c15, 0, 6_409_272_458_699_751_175),
    (0x9e37_79b9_7f4a_7c15, 1, 5_987_356_902_031_041_503),
    (0x9e37_79b9_7f4a_7c15, 2, 7_056_506_129_733_879_996),
    (0x9e37_79b9_7f4a_7c15, 1000, 17_993_357_539_397_287_565),
    (0x9e37_79b9_7f4a_7c15, u64::MAX, 11_022_678_192_711_119_083),
    (0xdead_beef_cafe_f00d, 0, 2_707_888_645_904_291_241),
    (0xdead_beef_cafe_f00d, 1, 1_669_841_160_692_257_102),
    (0xdead_beef_cafe_f00d, 2, 4_885_265_609_585_507_023),
    (0xdead_beef_cafe_f00d, 1000, 14_937_225_324_796_531_186),
    (0xdead_beef_cafe_f00d, u64::MAX, 14_480_473_762_029_823_590),
    (u64::MAX, 0, 6_254_647_548_650_071_986),
    (u64::MAX, 1, 15_682_366_355_837_959_586),
    (u64::MAX, 2, 4_059_636_342_025_631_211),
    (u64::MAX, 1000, 17_694_496_807_641_141_299),
    (u64::MAX, u64::MAX, 13_022_637_563_981_439_720),
];

#[test]
fn s5_placement_random_is_pinned_for_stored_seeds_and_draw_counts() {
    for (seed, draws, want) in PINNED {
        assert_eq!(
            counters(seed, draws).placement_random(),
            want,
            "seed {seed:#x}, draws {draws}"
        );
    }
}

#[test]
fn s5_placement_random_depends_on_the_seed_and_the_draws_only() {
    for (seed, draws, want) in PINNED {
        let other = PoolCounters {
            next_seq: 99,
            last_served_seq: 42,
            ..counters(seed, draws)
        };
        assert_eq!(
            other.placement_random(),
            want,
            "seed {seed:#x}, draws {draws}"
        );
    }
}
