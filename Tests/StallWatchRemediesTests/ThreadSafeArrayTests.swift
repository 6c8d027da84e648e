// The thread-safe array against the classic failures: mutation during enumeration, re-entrant callbacks, races.
import Dispatch
import Foundation
import StallWatchRemedies
import StallWatchTestSupport
import Synchronization
import Testing

@Suite(.offPool) struct ThreadSafeArrayTests {
    @Test func indexAccessOutOfRangeReturnsNilInsteadOfTrapping() {
        let array = ThreadSafeArray([10, 20, 30])
        #expect(array[safe: 1] == 20)
        #expect(array[safe: 3] == nil)
        #expect(array[safe: -1] == nil)
        #expect(array.element(at: 99) == nil)
        array[safe: 7] = 70
        array[safe: 0] = 11
        #expect(array.snapshot == [11, 20, 30])
        #expect(array.insert(5, at: 4) == false)
        #expect(array.insert(5, at: 3) == true)
        #expect(array.remove(at: 4) == nil)
        #expect(array.remove(at: -1) == nil)
        #expect(array.remove(at: 0) == 11)
        #expect(array.removeFirst() == 20)
        #expect(array.removeLast() == 5)
        #expect(array.removeLast() == 30)
        #expect(array.removeLast() == nil)
        #expect(array.removeFirst() == nil)
        #expect(array.isEmpty)
    }

    @Test(.timeLimit(.minutes(3)))
    func enumeratingWhileAnotherThreadRemovesSeesOneConsistentSnapshot() async {
        let array = ThreadSafeArray(Array(0..<20_000))
        let done = Atomic<Bool>(false)
        let remover = Thread {
            // Remove from both ends, so every consistent state is a run of consecutive integers.
            while array.count > 2 {
                array.remove(at: 0)
                array.removeLast()
            }
            done.store(true, ordering: .releasing)
        }
        remover.start()
        var enumerations = 0
        var inconsistent = 0
        repeat {
            var previous: Int?
            var seen = 0
            array.forEach { value in
                if let previous, value != previous + 1 { inconsistent += 1 }
                previous = value
                seen += 1
            }
            var iterated = 0
            for _ in array { iterated += 1 }
            enumerations += 1
            _ = seen
        } while !done.load(ordering: .acquiring)
        #expect(inconsistent == 0)
        #expect(enumerations > 0)
        #expect(array.count == 2 || array.count == 1 || array.count == 0)
    }

    @Test(.timeLimit(.minutes(3)))
    func callbacksDuringEnumerationMayCallCountAndAppendWithoutDeadlock() {
        let array = ThreadSafeArray(Array(0..<1000))
        // A writer keeps barrier blocks queued, the situation in which a nested read on a concurrent queue
        // would wait behind the writer that waits behind it.
        let stop = Atomic<Bool>(false)
        let writerDone = DispatchSemaphore(value: 0)
        let writer = Thread {
            while !stop.load(ordering: .acquiring) {
                // One barrier block that leaves the contents as they were (two separate writes could remove an
                // element another thread appended in between).
                array.mutate {
                    $0.append(-1)
                    $0.removeLast()
                }
            }
            writerDone.signal()
        }
        writer.start()

        var countsSeen: [Int] = []
        array.forEach { value in
            countsSeen.append(array.count)
            array.append(value + 1000)
        }
        #expect(countsSeen.count == 1000)
        #expect(zip(countsSeen, countsSeen.dropFirst()).allSatisfy { $0 <= $1 + 1 })
        let found = array.first { value in
            array.append(0)
            return value == 500 && array.count > 0
        }
        #expect(found == 500)
        stop.store(true, ordering: .releasing)
        writerDone.wait()

        // The exclusive path: calls back into the array from inside `mutate` run inline, on the state being built.
        let result = array.mutate { contents -> Int in
            contents.append(42)
            let seenInside = array.count
            array.append(43)
            #expect(contents.last == 43)
            #expect(array.last == 43)
            #expect(array[safe: seenInside - 1] == 42)
            array.mutate { $0.append(44) }
            return seenInside
        }
        #expect(array.last == 44)
        #expect(result > 2000)
        var wroteFromPredicate = false
        let removed = array.removeAll { value in
            if !wroteFromPredicate {
                wroteFromPredicate = true
                array.append(7_000_000)  // a write from the predicate: the removal starts over on the new contents
            }
            return value >= 1000 && value < 2000 || value == 7_000_000
        }
        #expect(removed == 1001)
        #expect(!array.contains { $0 >= 1000 && $0 < 2000 })
    }

    @Test(.timeLimit(.minutes(2)))
    func eightThreadsOfOneHundredThousandMixedOperationsEndWithTheExpectedCount() {
        let array = ThreadSafeArray<Int>(Array(0..<1000))
        let appended = Atomic<Int>(0)
        let removed = Atomic<Int>(0)
        let operations = 100_000
        let seeded = SeededGenerator()
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            var rng = seeded.derived(thread)
            var localAppended = 0
            var localRemoved = 0
            for i in 0..<operations {
                switch i % 10 {
                case 0, 1, 2:
                    array.append(thread * operations + i)
                    localAppended += 1
                case 3:
                    if array.remove(at: Int.random(in: 0..<64, using: &rng)) != nil { localRemoved += 1 }
                case 4:
                    if array.removeLast() != nil { localRemoved += 1 }
                case 5:
                    _ = array[safe: Int.random(in: -5..<5000, using: &rng)]
                case 6:
                    _ = array.count
                case 7:
                    if array.insert(i, at: Int.random(in: 0..<8, using: &rng)) { localAppended += 1 }
                case 8:
                    array.mutate { contents in
                        if let last = contents.popLast() { contents.insert(last, at: 0) }
                    }
                default:
                    if i % 5000 == 9 { _ = array.contains { $0 == -1 } } else { _ = array.first }
                }
            }
            appended.add(localAppended, ordering: .relaxed)
            removed.add(localRemoved, ordering: .relaxed)
        }
        let expected = 1000 + appended.load(ordering: .relaxed) - removed.load(ordering: .relaxed)
        #expect(array.count == expected, "seed \(seeded.seed)")
        #expect(array.snapshot.count == expected, "seed \(seeded.seed)")
    }
}
