// A seeded random generator for randomised tests: every run prints its seed, and a seed given replays a run.
import Foundation

/// SplitMix64 seeded from `STALLWATCH_TEST_SEED` when it is set (to replay a failed run), else from the system's
/// generator; the seed is printed with the test's name, so any run can be replayed. One generator per thread:
/// ``derived(_:)`` gives thread `n` a generator of its own from the same seed.
package struct SeededGenerator: RandomNumberGenerator, Sendable {
    /// The seed of this run, printed at creation.
    package let seed: UInt64
    private var state: UInt64

    /// A generator for the test `test`, whose seed is printed.
    package init(test: String = #function) {
        let given = ProcessInfo.processInfo.environment["STALLWATCH_TEST_SEED"].flatMap { UInt64($0) }
        self.init(seed: given ?? UInt64.random(in: .min ... .max))
        print("\(test): random seed \(seed) (replay: STALLWATCH_TEST_SEED=\(seed))")
    }

    /// A generator of `seed` (nothing printed).
    package init(seed: UInt64) {
        self.seed = seed
        state = seed
    }

    /// A generator of its own for the `index`th thread or part of the test, from this seed.
    package func derived(_ index: Int) -> SeededGenerator {
        var mixer = SeededGenerator(seed: seed ^ (UInt64(truncatingIfNeeded: index) &* 0xD1B5_4A32_D192_ED03))
        return SeededGenerator(seed: mixer.next())
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
