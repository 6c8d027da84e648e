// TerminalText: the one escaping of report content for text views, so a report cannot drive the terminal.
import StallWatch

/// Report content (annotations carry request data; loop and thread names come from other processes) escaped
/// for a terminal: C0 and C1 control characters, DEL, and the codepoints that reorder or hide text (bidi
/// overrides and isolates, line and paragraph separators, zero-width marks) become visible `\x1B` / `\u{202E}`
/// text. Every text view goes through ``escape(_:)``; the HTML page has its own escaping.
enum TerminalText {
    /// `text` with every terminal-dangerous codepoint written as an escape; idempotent.
    static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isDangerous) else { return text }
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count + 8)
        for scalar in text.unicodeScalars {
            if !isDangerous(scalar) {
                out.unicodeScalars.append(scalar)
            } else if scalar.value < 0x100 {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\x" + (hex.count < 2 ? "0" : "") + hex
            } else {
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            }
        }
        return out
    }

    /// Whether `scalar` may change what a terminal shows beyond printing a glyph.
    static func isDangerous(_ scalar: Unicode.Scalar) -> Bool { PrintableText.isDangerous(scalar) }

    /// A copy of `report` with every string a view may show escaped (see ``escape(_:)``).
    static func escaped(_ report: StallReport) -> StallReport {
        var r = report
        r.id = escape(r.id)
        r.detection.source = DetectionSource(rawValue: escape(r.detection.source.rawValue))
        r.process.executable = escape(r.process.executable)
        r.process.buildId = r.process.buildId.map(escape)
        r.process.host = escape(r.process.host)
        r.loop.name = escape(r.loop.name)
        r.loop.phase = escape(r.loop.phase)
        r.samples = r.samples.map { sample in
            var s = sample
            s.frames = s.frames.map(escaped)
            s.error = s.error.map(escape)
            s.thread = s.thread.map(escaped)
            return s
        }
        r.images = r.images.map { image in
            var i = image
            i.path = escape(i.path)
            i.buildId = i.buildId.map(escape)
            return i
        }
        r.signature = escape(r.signature)
        r.capture.method = CaptureMethod(rawValue: escape(r.capture.method.rawValue))
        r.capture.errors = r.capture.errors.map(escape)
        r.notes = r.notes.map(escape)
        r.annotations = Dictionary(
            r.annotations.map { (escape($0.key), escape($0.value)) }, uniquingKeysWith: { first, _ in first })
        if let evidence = r.cause?.evidence { r.cause?.evidence = evidence.map(escape) }
        if var process = r.cause?.blockingProcess {
            process.name = escape(process.name)
            process.reason = escape(process.reason)
            process.state = process.state.map(escape)
            process.frames = process.frames?.map(escaped)
            r.cause?.blockingProcess = process
        }
        let holders = r.cause?.candidateHolders?.map { holder in
            var h = holder
            h.name = escape(h.name)
            h.reason = escape(h.reason)
            return h
        }
        r.cause?.candidateHolders = holders
        r.hungAwait = r.hungAwait.map(escaped)
        let taskName = r.task?.name
        r.task?.name = taskName.map(escape)
        r.callTree = r.callTree?.map(escaped)
        if let frames = r.pointStack?.frames { r.pointStack?.frames = frames.map(escaped) }
        r.threads = r.threads?.map { thread in
            var t = thread
            t.name = escape(t.name)
            t.state = escape(t.state)
            t.wchan = t.wchan.map(escape)
            t.syscall = t.syscall.map(escape)
            t.frames = t.frames.map(escaped)
            t.error = t.error.map(escape)
            return t
        }
        r.leadUp = r.leadUp.map(escaped)
        return r
    }

    private static func escaped(_ hung: StallReport.HungAwaitDescription) -> StallReport.HungAwaitDescription {
        var h = hung
        h.waitKind = escape(h.waitKind)
        h.chainEnd = h.chainEnd.map(escape)
        h.awaitSite = h.awaitSite.map(escape)
        h.awaitingFunction = h.awaitingFunction.map(escape)
        h.chain = h.chain.map { link in
            var l = link
            l.name = l.name.map(escape)
            l.state = escape(l.state)
            l.waitKind = l.waitKind.map(escape)
            l.awaitSite = l.awaitSite.map(escape)
            l.awaitingFunction = l.awaitingFunction.map(escape)
            return l
        }
        h.awaitedBy = h.awaitedBy?.map { waiter in
            var w = waiter
            w.name = w.name.map(escape)
            w.via = w.via.map(escape)
            return w
        }
        return h
    }

    private static func escaped(_ leadUp: StallReport.LeadUp) -> StallReport.LeadUp {
        var l = leadUp
        l.buckets.longestLabel = l.buckets.longestLabel.map(escape)
        func item(_ item: StallReport.LeadUp.Item) -> StallReport.LeadUp.Item {
            var i = item
            i.label = i.label.map(escape)
            i.stacks = i.stacks?.map { stack in
                var s = stack
                s.frames = s.frames.map(escaped)
                return s
            }
            return i
        }
        l.items = l.items.map(item)
        l.inFlight = l.inFlight.map(item)
        l.topItems = l.topItems.map(item)
        l.findings = l.findings.map(escape)
        if var source = l.stackSource {
            source.method = source.method.map(escape)
            source.note = source.note.map(escape)
            l.stackSource = source
        }
        return l
    }

    static func escaped(_ frame: StackFrame) -> StackFrame {
        var f = frame
        f.symbol = f.symbol.map(escape)
        f.shortSymbol = f.shortSymbol.map(escape)
        f.image = f.image.map(escape)
        f.file = f.file.map(escape)
        return f
    }

    private static func escaped(_ state: StallReport.ThreadState) -> StallReport.ThreadState {
        var t = state
        t.state = escape(t.state)
        t.wchan = t.wchan.map(escape)
        t.syscall = t.syscall.map(escape)
        return t
    }

    private static func escaped(_ node: CallTree.Node) -> CallTree.Node {
        var n = node
        n.frame = escaped(n.frame)
        n.children = n.children.map(escaped)
        return n
    }
}
