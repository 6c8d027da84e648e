// The lock book: the library's semaphore calls record their last taker, and StallWatch reads the record back.
import Dispatch
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

/// The built lock book, opened in this process with `RTLD_LOCAL` (so it interposes nothing here): its semaphore
/// calls are called directly, as a program that preloaded it would call them.
private struct OpenedLockBook: @unchecked Sendable {
    typealias Call = @convention(c) (UnsafeMutablePointer<sem_t>?) -> Int32
    typealias Initialise = @convention(c) (UnsafeMutablePointer<sem_t>?, Int32, UInt32) -> Int32
    let handle: UnsafeMutableRawPointer
    let wait: Call
    let tryWait: Call
    let post: Call
    let destroy: Call
    let initialise: Initialise
    let table: UnsafeRawPointer

    static let shared: OpenedLockBook? = {
        let path = Fixtures.executable(LockBook.libraryName)
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else { return nil }
        func call<T>(_ name: String, _ type: T.Type) -> T? { dlsym(handle, name).map { unsafeBitCast($0, to: T.self) } }
        guard let wait = call("sem_wait", Call.self), let tryWait = call("sem_trywait", Call.self),
            let post = call("sem_post", Call.self), let destroy = call("sem_destroy", Call.self),
            let initialise = call("sem_init", Initialise.self), let table = dlsym(handle, "sw_lock_book")
        else { return nil }
        return OpenedLockBook(
            handle: handle, wait: wait, tryWait: tryWait, post: post, destroy: destroy, initialise: initialise,
            table: UnsafeRawPointer(table))
    }()

    static func open() throws -> OpenedLockBook {
        let why = dlerror().map { String(cString: $0) } ?? "no dlerror text"
        return try #require(shared, "cannot open \(Fixtures.executable(LockBook.libraryName)): \(why)")
    }
}

@Suite(.offPool, .serialized) struct LockBookTests {
    @Test func theReaderMirrorsTheLibrarysTableAndFindsItInThisProcessByItsExportedSymbol() throws {
        let book = try OpenedLockBook.open()
        #expect(book.table.load(as: UInt32.self) == LockBook.magic)
        #expect(book.table.load(fromByteOffset: 4, as: UInt32.self) == LockBook.version)
        #expect(book.table.load(fromByteOffset: 8, as: UInt32.self) == UInt32(LockBook.slotCount))
        #expect(book.table.load(fromByteOffset: 12, as: UInt32.self) == UInt32(LockBook.slotBytes))
        // Found from the maps and the file's dynamic symbols, as from another process.
        #expect(LockBook.table(pid: getpid()) == UInt64(UInt(bitPattern: book.table)))
    }

    /// Two hundred semaphores taken by this thread: each record is found where the reader looks (the same probe
    /// as the library's), and a post clears it.
    @Test func everyTakenSemaphoreNamesItsTakerUntilItIsPosted() throws {
        let book = try OpenedLockBook.open()
        let count = 200
        let semaphores = UnsafeMutablePointer<sem_t>.allocate(capacity: count)
        defer { semaphores.deallocate() }
        for index in 0..<count { #expect(book.initialise(semaphores + index, 0, 1) == 0) }
        let me = StallWatchTestSupport.currentThreadID()
        func taker(_ index: Int) -> Int32? {
            LockBook.taker(pid: getpid(), address: UInt64(UInt(bitPattern: semaphores + index)))
        }
        #expect((0..<count).allSatisfy { taker($0) == nil })
        for index in 0..<count { #expect((index % 2 == 0 ? book.wait : book.tryWait)(semaphores + index) == 0) }
        let named = (0..<count).filter { taker($0) == me }.count
        #expect(named == count)
        for index in 0..<count { #expect(book.post(semaphores + index) == 0) }
        #expect((0..<count).allSatisfy { taker($0) == nil })
        // A semaphore made anew where a taken one was destroyed starts with no taker.
        #expect(book.wait(semaphores) == 0)
        #expect(book.destroy(semaphores) == 0)
        #expect(book.initialise(semaphores, 0, 1) == 0)
        #expect(taker(0) == nil)
        for index in 0..<count { _ = book.destroy(semaphores + index) }
    }

    /// A thread holds a semaphore lock taken through the lock book, another blocks on it: the holder is found from
    /// the waiter's futex wait, as the lock book recorded it; once released and taken by the waiter, the record
    /// names the waiter.
    @Test(.timeLimit(.minutes(1)))
    func aWaiterBlockedOnASemaphoreAnotherThreadTookNamesThatThreadAsRecordedByTheLockBook() throws {
        let book = try OpenedLockBook.open()
        let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
        defer { semaphore.deallocate() }
        #expect(book.initialise(semaphore, 0, 1) == 0)
        defer { _ = book.destroy(semaphore) }
        let address = UInt(bitPattern: semaphore)
        let (found, holder, waiter) = try StallWatchTestSupport.findWhileHeld(
            lockWord: UInt64(address), take: { _ = book.wait(UnsafeMutablePointer(bitPattern: address)) },
            release: { _ = book.post(UnsafeMutablePointer(bitPattern: address)) },
            block: { _ = book.wait(UnsafeMutablePointer(bitPattern: address)) })
        #expect(found?.threadID == holder)
        #expect(found?.record == .lockBook)
        #expect(found?.recorder == "the process's lock book")
        #expect(found?.how.contains("was the last to take the semaphore") == true, "\(found?.how ?? "")")
        // The waiter took it once released: the record follows.
        #expect(LockBook.taker(pid: getpid(), address: UInt64(address)) == waiter)
        _ = book.post(semaphore)
    }

    /// A process that did not preload the lock book has no table to read.
    @Test func aProcessWithoutTheLockBookHasNoTable() throws {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["30"]
        try child.run()
        defer { child.terminate() }
        // Until it runs `sleep`, the child is a copy of this process, which has the lock book open.
        #expect(
            pollUntil {
                ProcDirectory(processID: child.processIdentifier).maps()?.contains {
                    $0.path?.hasSuffix("/sleep") == true
                }
                    == true
            })
        #expect(LockBook.table(pid: child.processIdentifier) == nil)
    }
}
