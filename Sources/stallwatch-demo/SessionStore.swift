// The chat sessions the demo service keeps: the sessions, their display order, and the rendered list.
import Foundation
import StallWatchRemedies

/// One chat session.
struct Session: Sendable, Equatable {
    var id: Int
    var title: String
    var pinned: Bool
    var archived: Bool
    /// A global message sequence number: larger is more recent.
    var lastMessageAt: UInt64
    var messageCount: Int
    var lastMessage: String

    /// The list order: pinned first, then the most recent message, then id.
    @Sendable static func displayOrder(_ a: Session, _ b: Session) -> Bool {
        if a.pinned != b.pinned { return a.pinned }
        if a.lastMessageAt != b.lastMessageAt { return a.lastMessageAt > b.lastMessageAt }
        return a.id < b.id
    }

    static func generate(count: Int, seed: UInt64) -> [Session] {
        var state = seed | 1
        func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
        return (0..<count).map { id in
            Session(
                id: id, title: "session \(id)", pinned: id % 97 == 0, archived: id % 10 == 9,
                lastMessageAt: next() % 1_000_000, messageCount: 0, lastMessage: "")
        }
    }
}

/// The service's sessions and the sorted, filtered list clients see.
///
/// `sessions` is a ``ThreadSafeArray`` so a background recomputation can take a snapshot while the loop keeps
/// writing; `displayList` (the sorted, filtered view) belongs to the loop.
final class SessionStore: @unchecked Sendable {  // displayList and messageClock: loop thread only
    let sessions: ThreadSafeArray<Session>
    /// Visible sessions in display order, as last computed.
    var displayList: [Session] = []
    private var messageClock: UInt64 = 1_000_000

    init(count: Int) {
        sessions = ThreadSafeArray(Session.generate(count: count, seed: 0x5eed), label: "demo.sessions")
        displayList = Self.sortedVisible(sessions.snapshot)
    }

    /// Records a message; returns the session's message count, or nil for an unknown session. Loop thread.
    func record(message: String, in id: Int) -> Int? {
        messageClock += 1
        let clock = messageClock
        return sessions.mutate { all -> Int? in
            guard all.indices.contains(id) else { return nil }
            all[id].lastMessageAt = clock
            all[id].messageCount += 1
            all[id].lastMessage = String(message.prefix(200).filter { $0.isLetter || $0.isNumber || $0 == " " })
            return all[id].messageCount
        }
    }

    /// Toggles a session's pin; returns the new state, or nil for an unknown session.
    func togglePin(_ id: Int) -> Bool? {
        sessions.mutate { all -> Bool? in
            guard all.indices.contains(id) else { return nil }
            all[id].pinned.toggle()
            return all[id].pinned
        }
    }

    /// The visible (not archived) sessions in display order: the full re-sort.
    static func sortedVisible(_ all: [Session]) -> [Session] {
        all.filter { !$0.archived }.sorted(by: Session.displayOrder)
    }

    /// The first `limit` sessions of the display list whose title contains `filter`, as JSON.
    func render(filter: String?, limit: Int) -> String {
        var rows: [String] = []
        for session in displayList where rows.count < limit {
            if let filter, !filter.isEmpty, !session.title.contains(filter) { continue }
            let last = session.lastMessage.replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "\"", with: "\\\"")
            rows.append(
                #"{"id":\#(session.id),"title":"\#(session.title)","pinned":\#(session.pinned),"#
                    + #""messages":\#(session.messageCount),"last":"\#(last)"}"#)
        }
        return "[" + rows.joined(separator: ",") + "]\n"
    }
}
