// The other end of a loopback TCP connection, Unix socket or pipe, and the /proc text it is read from.
import CStallWatchCore
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct PeerEndpointsTests {
    /// A client 127.0.0.1:51234 → 127.0.0.1:8080 (inode 111), the server's accepted socket (222), its listener
    /// (333), a remote connection (444), and hostile lines.
    static let tcp = """
          sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
           0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1 0
           1: 0100007F:C822 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 111 1 0
           2: 0100007F:1F90 0100007F:C822 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0
           3: 0A000002:D000 5DB8D822:01BB 01 00000000:00000000 00:00000000 00000000     0        0 444 1 0
           4: garbage
           5: 0100007F:1F90 0100007F:C822 01 00000000:00000000 00:00000000 00000000     0        0 notanumber
        """

    @Test func aLoopbackConnectionsOtherEndIsTheLineWithTheAddressesSwapped() {
        let found = LoopbackTCP.peer(of: 111, in: LoopbackTCP.lines(in: Self.tcp))
        #expect(found?.peerInode == 222 && found?.listening == false)
        #expect(found?.connection == "127.0.0.1:51234 → 127.0.0.1:8080")
    }

    @Test func aConnectionNotYetAcceptedLeadsToTheListeningSocket() {
        let lines = LoopbackTCP.lines(in: Self.tcp).filter { $0.inode != 222 }
        let found = LoopbackTCP.peer(of: 111, in: lines)
        #expect(found?.peerInode == 333 && found?.listening == true)
    }

    @Test func aRemoteConnectionHasNoLocalPeerAndHostileLinesAreSkipped() {
        let lines = LoopbackTCP.lines(in: Self.tcp)
        #expect(lines.count == 4)
        let remote = LoopbackTCP.peer(of: 444, in: lines)
        #expect(remote != nil && remote?.peerInode == nil)
        #expect(LoopbackTCP.peer(of: 999, in: lines) == nil)
        #expect(LoopbackTCP.lines(in: "\u{0}:\n 1: : : 0A 1 2 3 4 5 6\n").isEmpty)
    }

    @Test func loopbackAddressesInBothTables() {
        #expect(LoopbackTCP.isLoopback("0100007F:1F90"))
        #expect(LoopbackTCP.isLoopback("00000000000000000000000001000000:1F90"))
        #expect(LoopbackTCP.isLoopback("0000000000000000FFFF00000100007F:1F90"))
        #expect(!LoopbackTCP.isLoopback("0A000002:1F90"))
        #expect(!LoopbackTCP.isLoopback(":"))
        #expect(LoopbackTCP.address("0000000000000000FFFF00000100007F:1F90") == "[::ffff:127.0.0.1]:8080")
    }

    @Test func fdinfoFlagsAndEpollTargetsAreParsedAndTruncatedTextYieldsNothing() {
        let fdinfo =
            "pos:\t0\nflags:\t02004001\nmnt_id:\t15\ntfd:        5 events:       19 data: 5  pos:0 ino:3 sdev:c\n"
            + "tfd:       12 events:        1 data: c  pos:0 ino:4 sdev:c\ntfd:"
        #expect(ProcDescriptorInfo.flags(in: fdinfo) == 0o2004001)
        #expect(ProcDescriptorInfo.epollTargets(in: fdinfo) == [5, 12])
        #expect(ProcDescriptorInfo.flags(in: "flags:\tzz\n") == nil)
        #expect(ProcDescriptorInfo.inode("pipe:[42]", kind: "pipe") == 42)
        #expect(ProcDescriptorInfo.inode("pipe:[42", kind: "pipe") == nil)
        #expect(ProcDescriptorInfo.inode("socket:[42]", kind: "pipe") == nil)
    }

    /// A socket pair of this process: the kernel's sock_diag names each end as the other's peer.
    @Test func aUnixSocketPairsPeerIsTheOtherEnd() throws {
        var fds: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { fds.forEach { close($0) } }
        let process = ProcDirectory.current
        let inodes = fds.compactMap {
            process.descriptorTarget($0).flatMap { ProcDescriptorInfo.inode($0, kind: "socket") }
        }
        try #require(inodes.count == 2)
        #expect(sw_unix_peer_inode(UInt32(inodes[0])) == Int(inodes[1]))
        #expect(sw_unix_peer_inode(UInt32(inodes[1])) == Int(inodes[0]))
    }

    /// A pipe read by this process, which holds its write end too.
    @Test func aPipeWhoseWriteEndTheReaderHoldsNamesNoOtherProcess() throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { fds.forEach { close($0) } }
        let waits = WaitDescriptors(descriptors: [fds[0]], reading: true, timeoutMs: nil, isEventWait: false)
        // Read by this process, which holds the write end itself: a hand-off between its own threads.
        #expect(PeerEndpoints.otherProcess(pid: getpid(), waits: waits) == nil)
    }
}
