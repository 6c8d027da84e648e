// The demo chat-sessions service: routes, the unremedied message path, and the same work done with the remedies.
import Foundation
import StallWatch
import StallWatchRemedies

/// A chat-sessions service on an ``EventLoop``: clients post messages to sessions and read the session list,
/// which the service keeps sorted (pinned first, then most recent) and filtered (archived sessions hidden).
///
/// Unremedied (`fixed == false`), each message does its heavy work on the loop: a journal write with fsync,
/// an insert under the lock the background database writer holds for checkpoints, and a full re-sort of the
/// session list. Remedied, the same work goes through StallWatchRemedies: the journal is group-committed by a
/// ``BackgroundWorker`` and the reply waits for it on the loop, the database row is handed over through a
/// ``ThreadSafeArray``, and the re-sort is a ``BackgroundRecomputer`` that coalesces a burst of messages into one
/// background sort delivered on the loop. The stall endpoints run the remedied version of each stall too.
final class ChatService: @unchecked Sendable {  // loop-confined
    let loop: EventLoop
    let fixed: Bool
    let store: SessionStore
    let database: DatabaseWriter
    let journal: Journal
    private let scratchFD: Int32
    private let scratchPath: String
    private let lockedList: LockedSessionList
    /// The huge list the `sort` stall re-sorts, and its visible part for the chunked version (made at startup:
    /// generating it on the loop would itself stall).
    private let hugeList: [Session]
    private let hugeVisible: [Session]
    private let recomputer: BackgroundRecomputer<Int, [Session]>
    private let chunks: ChunkedExecutor
    private let offloader: BackgroundWorker
    var onQuit: @Sendable () -> Void = {}
    private(set) var requests = 0
    private(set) var messages = 0

    init(loop: EventLoop, fixed: Bool, sessions: Int, dataDirectory: String) throws {
        self.loop = loop
        self.fixed = fixed
        let store = SessionStore(count: sessions)
        self.store = store
        database = DatabaseWriter(loop: loop)
        journal = try Journal(directory: dataDirectory, loop: loop)
        scratchPath = dataDirectory + "/scratch.dat"
        scratchFD = open(scratchPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        lockedList = LockedSessionList(ids: Array(0..<sessions))
        hugeList = Session.generate(count: 100_000, seed: 0xb16)
        hugeVisible = hugeList.filter { !$0.archived }
        recomputer = BackgroundRecomputer(scheduler: loop) { _ in
            SessionStore.sortedVisible(store.sessions.snapshot)
        } deliver: { sorted in
            store.displayList = sorted
        }
        chunks = ChunkedExecutor(scheduler: loop, timeBudget: .milliseconds(4))
        offloader = BackgroundWorker(scheduler: loop, label: "demo.offload")
        database.start()
    }

    func stop() {
        database.stop()
        close(scratchFD)
        unlink(scratchPath)
    }

    var mode: String { fixed ? "fixed" : "unfixed" }

    // MARK: Routing

    func handle(_ request: HTTPRequest, _ responder: HTTPResponder) {
        requests += 1
        loop.annotate("route", "\(request.method) \(request.path)")
        defer { loop.clearAnnotations() }
        let parts = request.pathComponents
        switch (request.method, parts.count, parts.first) {
        case ("GET", 1, "health"):
            responder.respond(.text("ok\n"))
        case ("GET", 1, "sessions"):
            let limit = request.query["limit"].flatMap(Int.init) ?? 20
            responder.respond(.json(store.render(filter: request.query["q"], limit: max(0, min(limit, 1000)))))
        case ("POST", 3, "sessions") where parts[2] == "messages":
            guard let id = Int(parts[1]) else { return responder.respond(.badRequest("session id")) }
            postMessage(String(decoding: request.body, as: UTF8.self), to: id, responder)
        case ("POST", 3, "sessions") where parts[2] == "pin":
            guard let id = Int(parts[1]), let pinned = store.togglePin(id) else {
                return responder.respond(.notFound(request.path))
            }
            resort(changed: id)
            responder.respond(.json(#"{"session":\#(id),"pinned":\#(pinned)}"# + "\n"))
        case ("POST", 2, "stall"):
            guard let kind = ServiceStallKind(rawValue: String(parts[1])) else {
                let kinds = ServiceStallKind.allCases.map(\.rawValue).joined(separator: ", ")
                return responder.respond(.notFound("stall kind \(parts[1]) (expected one of \(kinds))"))
            }
            let ms = request.query["ms"].flatMap(Int.init) ?? 600
            guard (1...60_000).contains(ms) else { return responder.respond(.badRequest("ms from 1 to 60000")) }
            injectStall(kind, durationMs: ms, responder)
        case ("GET", 1, "stats"):
            responder.respond(
                .json(
                    #"{"mode":"\#(mode)","requests":\#(requests),"messages":\#(messages),"#
                        + #""recomputations":\#(recomputer.computationCount),"journalBatches":\#(journal.batchesWritten),"#
                        + #""databaseRows":\#(database.rowCount)}"# + "\n"))
        case ("POST", 1, "quit"):
            responder.respond(.text("bye\n"))
            loop.schedule(after: .milliseconds(20)) { [self] in onQuit() }
        default:
            responder.respond(.notFound("\(request.method) \(request.path)"))
        }
    }

    // MARK: Messages

    private func postMessage(_ text: String, to id: Int, _ responder: HTTPResponder) {
        guard let count = store.record(message: text, in: id) else {
            return responder.respond(.notFound("session \(id)"))
        }
        messages += 1
        let row = "\(id)\t\(count)\t\(text.prefix(200))"
        let reply = HTTPResponse.json(#"{"session":\#(id),"messages":\#(count)}"# + "\n")
        if fixed {
            database.insert(row)
            resort(changed: id)
            journal.append(row) { responder.respond(reply) }
        } else {
            journal.appendSynchronously(row)
            database.insertHoldingLock(row)
            resort(changed: id)
            responder.respond(reply)
        }
    }

    /// Keeps the display list in order after a change to session `id`.
    private func resort(changed id: Int) {
        if fixed {
            recomputer.signal(id)
        } else {
            store.displayList = SessionStore.sortedVisible(store.sessions.snapshot)
        }
    }

    // MARK: Stalls

    private func injectStall(_ kind: ServiceStallKind, durationMs ms: Int, _ responder: HTTPResponder) {
        let started = DispatchTime.now().uptimeNanoseconds
        let mode = mode
        let done: @Sendable () -> Void = {
            let took = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
            responder.respond(
                .json(
                    #"{"kind":"\#(kind.rawValue)","mode":"\#(mode)","ms":\#(ms),"tookMs":\#(Int(took))}"# + "\n"))
        }
        if !fixed {
            switch kind {
            case .io: ServiceStalls.writeJournalSynchronously(fd: scratchFD, durationMs: ms)
            case .sort: _ = ServiceStalls.resortHugeSessionList(hugeList, durationMs: ms)
            case .lock: ServiceStalls.waitForDatabaseWriterLock(database, durationMs: ms)
            case .deadlock: ServiceStalls.lockSessionsThenIndex(durationMs: ms)
            case .reentrant: _ = ServiceStalls.reenterSessionLockFromEnumeration(lockedList, durationMs: ms)
            }
            return done()
        }
        switch kind {
        case .io:
            // The same writes and fsyncs, on a background queue; the reply comes back on the loop.
            let fd = scratchFD
            offloader.submit({ ServiceStalls.writeJournalSynchronously(fd: fd, durationMs: ms) }) { _ in done() }
        case .sort:
            // The same re-sorting for the same time, in chunks of at most 4 ms with the loop turning in between.
            let end = started + UInt64(ms) * 1_000_000
            chunkedResort(until: end, then: done)
        case .lock:
            // The writer thread still holds its lock for the long write; the loop never asks for it.
            database.insert("stall", holdMs: ms, completion: done)
        case .deadlock:
            // One lock order for everyone, and the waiting happens off the loop.
            offloader.submit({ ServiceRemedies.lockInOneOrder(holdMs: ms) }) { _ in done() }
        case .reentrant:
            // Enumeration over a snapshot: the callback may ask the array for its count (and even append).
            let sessions = store.sessions
            _ = sessions.first { _ in sessions.count >= 0 }
            done()
        }
    }

    private func chunkedResort(until end: UInt64, then done: @escaping @Sendable () -> Void) {
        chunks.sort(hugeVisible, by: Session.displayOrder) { [self] _ in
            if DispatchTime.now().uptimeNanoseconds < end { chunkedResort(until: end, then: done) } else { done() }
        }
    }
}

/// The remedied versions of the stalls that need their own code.
enum ServiceRemedies {
    /// The deadlock's two locks, taken by a worker and by the request in the same order (sessions, then index):
    /// the request waits for the worker, off the loop, and never forms a cycle.
    static func lockInOneOrder(holdMs: Int) {
        let sessionsLock = TimedMutex()
        let indexLock = TimedMutex()
        let workerHolds = DispatchSemaphore(value: 0)
        let worker = Thread {
            sessionsLock.lock()
            indexLock.lock()
            workerHolds.signal()
            Stalls.sleepFor(milliseconds: holdMs)
            indexLock.unlock()
            sessionsLock.unlock()
        }
        worker.name = "demo-index-worker"
        worker.start()
        workerHolds.wait()
        sessionsLock.lock()
        indexLock.lock()
        indexLock.unlock()
        sessionsLock.unlock()
    }
}
