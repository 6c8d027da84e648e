// LeadUpLabels: the process-wide table that turns item labels into small ids, so the loop stores numbers only.
import Synchronization

/// Interns the labels of loop work (a `perform` label, a timer's or source's name, the annotations in force)
/// into 32-bit ids, registered where the label is given (off the loop's per-item path), and resolved back to
/// text when a report is built.
///
/// Bounded: at most ``capacity`` labels are kept. When a new label needs a slot, the least recently registered
/// one is evicted; its id then resolves to nil, never to another label (an id carries its slot's generation).
/// Labels are cut to ``maxLength`` bytes of printable text.
package final class LeadUpLabels: Sendable {
    /// The table every loop of the process shares.
    package static let shared = LeadUpLabels()

    /// Labels kept at once.
    package static let capacity = 4096
    /// Longest label kept, in UTF-8 bytes.
    package static let maxLength = 120

    private struct Table {
        var ids: [String: UInt32] = [:]
        var slots: [(text: String, generation: UInt32)?] = Array(repeating: nil, count: LeadUpLabels.capacity)
        var next = 0
        var generation: UInt32 = 1
    }

    private let table = Mutex(Table())

    package init() {}

    /// The id of `text` (registering it when new); 0 for an empty label.
    package func id(for text: String) -> UInt32 {
        let label = Self.clean(text)
        guard !label.isEmpty else { return 0 }
        return table.withLock { table in
            if let known = table.ids[label] { return known }
            let slot = table.next
            table.next = (table.next + 1) % Self.capacity
            if slot == 0 { table.generation = table.generation % 0xF_FFFF + 1 }
            if let old = table.slots[slot] { table.ids[old.text] = nil }
            table.slots[slot] = (label, table.generation)
            // Bits 0–11: the slot; 12–31: its generation (never 0, so no id is 0).
            let id = UInt32(slot) | table.generation << 12
            table.ids[label] = id
            return id
        }
    }

    /// The label of `id`, or nil for 0 or an evicted label.
    package func text(for id: UInt32) -> String? {
        guard id != 0 else { return nil }
        let slot = Int(id & 0xFFF), generation = id >> 12
        return table.withLock { table in
            guard let entry = table.slots[slot], entry.generation == generation else { return nil }
            return entry.text
        }
    }

    /// Printable text of at most ``maxLength`` bytes, cut at a character boundary.
    static func clean(_ text: String) -> String {
        let printable = PrintableText.filtered(text)
        guard printable.utf8.count > maxLength else { return printable }  // the common case: no copy
        var out = ""
        var bytes = 0
        for character in printable {
            let size = String(character).utf8.count
            guard bytes + size <= maxLength else { break }
            out.append(character)
            bytes += size
        }
        return out
    }

    /// The label of a set of annotations: `key=value` pairs sorted by key, space-separated.
    static func annotationLabel(_ annotations: [String: String]) -> String {
        annotations.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }
}
