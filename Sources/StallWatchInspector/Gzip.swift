// Gzip: compressing a pprof profile with zlib (deflate in a gzip wrapper, RFC 1952).
import CZlib

/// gzip through the system's zlib: pprof files are gzipped `profile.proto`, and real compression shrinks a
/// profile's repetitive tables several times over.
enum Gzip {
    /// `payload` deflated (best compression) inside a gzip header and trailer (MTIME 0: reproducible output).
    static func wrap(_ payload: [UInt8]) -> [UInt8] {
        var stream = z_stream()
        // windowBits 15 + 16: the gzip wrapper instead of zlib's.
        let initialized = deflateInit2_(
            &stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
            Int32(MemoryLayout<z_stream>.size))
        precondition(initialized == Z_OK, "deflateInit2 failed: \(initialized)")
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(payload.count))) + 64)
        var input = payload
        let produced = input.withUnsafeMutableBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                stream.next_in = source.baseAddress
                stream.avail_in = uInt(source.count)
                stream.next_out = target.baseAddress
                stream.avail_out = uInt(target.count)
                // deflateBound guarantees one Z_FINISH call suffices.
                let result = deflate(&stream, Z_FINISH)
                precondition(result == Z_STREAM_END, "deflate did not finish: \(result)")
                return target.count - Int(stream.avail_out)
            }
        }
        return Array(output.prefix(produced))
    }
}
