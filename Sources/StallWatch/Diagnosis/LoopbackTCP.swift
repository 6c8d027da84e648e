// LoopbackTCP: the local socket at the other end of a TCP connection, from /proc/<pid>/net/tcp and tcp6.

/// Reads a process's TCP sockets from `/proc/<pid>/net/tcp` and `tcp6` (its network namespace) to find, for a
/// connection whose remote address is a loopback one, the socket at the other end: the line with the two addresses
/// swapped, or — while the server has not accepted the connection — the socket listening on that port.
enum LoopbackTCP {
    /// A connection found by its socket's inode.
    struct Connection: Sendable, Hashable {
        /// `127.0.0.1:51234 → 127.0.0.1:8080`.
        var connection: String
        /// The other end's socket inode; nil when the remote address is not a loopback one, or not found.
        var peerInode: UInt64?
        /// The other end found is the listening socket (the connection is still in its accept queue).
        var listening = false
    }

    /// One line of the table: local and remote `hexaddress:hexport`, state (hex), inode.
    struct Line: Sendable, Hashable {
        var local: Substring
        var remote: Substring
        var state: Substring
        var inode: UInt64
    }

    /// The lines of a `/proc/net/tcp`-format table; header, hostile or truncated lines are skipped.
    static func lines(in text: String) -> [Line] {
        text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count >= 10, isEndpoint(f[1]), isEndpoint(f[2]), let inode = UInt64(f[9]) else { return nil }
            return Line(local: f[1], remote: f[2], state: f[3], inode: inode)
        }
    }

    /// The connection of socket `inode` in process `pid`, and its loopback peer; nil when it is no TCP socket.
    static func peer(pid: Int32, inode: UInt64) -> Connection? {
        for table in tables(pid: pid) {
            if let found = peer(of: inode, in: table) { return found }
        }
        return nil
    }

    /// The connection of socket `inode` among `lines` (one table), and its loopback peer.
    static func peer(of inode: UInt64, in lines: [Line]) -> Connection? {
        guard inode != 0, let mine = lines.first(where: { $0.inode == inode }) else { return nil }
        var found = Connection(connection: "\(address(mine.local)) → \(address(mine.remote))")
        guard isLoopback(mine.remote) else { return found }
        if let other = lines.first(where: { $0.local == mine.remote && $0.remote == mine.local && $0.inode != 0 }) {
            found.peerInode = other.inode
        } else if let port = mine.remote.split(separator: ":").last,
            let listener = lines.first(where: {
                $0.state == "0A" && $0.inode != 0 && $0.local.split(separator: ":").last == port
            })
        {
            found.peerInode = listener.inode
            found.listening = true
        }
        return found
    }

    /// `hexaddress:hexport`, the address of 8 or 32 hex digits.
    static func isEndpoint(_ text: Substring) -> Bool {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 8 || parts[0].count == 32, (1...4).contains(parts[1].count) else {
            return false
        }
        return parts.allSatisfy { $0.allSatisfy(\.isHexDigit) }
    }

    /// `0100007F` (little-endian IPv4) with first octet 127, or IPv6 `::1` or `::ffff:127.x.y.z`.
    static func isLoopback(_ endpoint: Substring) -> Bool {
        guard let hex = endpoint.split(separator: ":").first else { return false }
        if hex.count == 8 { return hex.hasSuffix("7F") }
        guard hex.count == 32 else { return false }
        return hex == "00000000000000000000000001000000"
            || (hex.hasPrefix("0000000000000000FFFF0000") && hex.hasSuffix("7F"))
    }

    /// `127.0.0.1:8080` for `0100007F:1F90`; an IPv6 address as its hex words.
    static func address(_ endpoint: Substring) -> String {
        let parts = endpoint.split(separator: ":")
        guard parts.count == 2, let port = UInt16(parts[1], radix: 16) else { return String(endpoint) }
        let hex = parts[0]
        if hex.count == 8, let value = UInt32(hex, radix: 16) {
            let octets = (0..<4).map { String((value >> (8 * $0)) & 0xff) }
            return octets.joined(separator: ".") + ":\(port)"
        }
        if hex == "00000000000000000000000001000000" { return "[::1]:\(port)" }
        if hex.count == 32, hex.hasPrefix("0000000000000000FFFF0000"), let value = UInt32(hex.suffix(8), radix: 16) {
            return "[::ffff:" + (0..<4).map { String((value >> (8 * $0)) & 0xff) }.joined(separator: ".") + "]:\(port)"
        }
        return "[\(hex)]:\(port)"
    }

    private static func tables(pid: Int32) -> [[Line]] {
        let process = ProcDirectory(processID: pid)
        return ["net/tcp", "net/tcp6"].compactMap { process.text($0).map(lines(in:)) }
    }
}
