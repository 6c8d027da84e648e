// Addresses in report JSON: `0x…` strings decoded as integers (``UInt64/init(hexAddress:)``), with errors that say so.
import Foundation

extension KeyedDecodingContainer {
    /// A `0x…` string read as an address; a string that is not hexadecimal is a data-corruption error.
    func decodeHexAddress(forKey key: Key) throws -> UInt64 {
        let text = try decode(String.self, forKey: key)
        guard let value = UInt64(hexAddress: text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self, debugDescription: "\"\(text)\" is not a hexadecimal address")
        }
        return value
    }

    func decodeHexAddressIfPresent(forKey key: Key) throws -> UInt64? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        return try decodeHexAddress(forKey: key)
    }
}

extension KeyedEncodingContainer {
    mutating func encodeHexAddress(_ value: UInt64, forKey key: Key) throws {
        try encode(value.hexAddress, forKey: key)
    }

    mutating func encodeHexAddressIfPresent(_ value: UInt64?, forKey key: Key) throws {
        try encodeIfPresent(value?.hexAddress, forKey: key)
    }
}

extension StackFrame {
    enum CodingKeys: String, CodingKey {
        case address, image, offset, symbol, symbolOffset, file, line, shortSymbol, kind
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            address: try c.decodeHexAddress(forKey: .address),
            image: try c.decodeIfPresent(String.self, forKey: .image),
            offset: try c.decodeHexAddressIfPresent(forKey: .offset),
            symbol: try c.decodeIfPresent(String.self, forKey: .symbol),
            symbolOffset: try c.decodeIfPresent(Int.self, forKey: .symbolOffset),
            file: try c.decodeIfPresent(String.self, forKey: .file),
            line: try c.decodeIfPresent(Int.self, forKey: .line),
            shortSymbol: try c.decodeIfPresent(String.self, forKey: .shortSymbol))
        // A kind this version does not know reads as an ordinary frame.
        kind = try c.decodeIfPresent(String.self, forKey: .kind).flatMap(Kind.init(rawValue:))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeHexAddress(address, forKey: .address)
        try c.encodeIfPresent(image, forKey: .image)
        try c.encodeHexAddressIfPresent(offset, forKey: .offset)
        try c.encodeIfPresent(symbol, forKey: .symbol)
        try c.encodeIfPresent(symbolOffset, forKey: .symbolOffset)
        try c.encodeIfPresent(file, forKey: .file)
        try c.encodeIfPresent(line, forKey: .line)
        try c.encodeIfPresent(shortSymbol, forKey: .shortSymbol)
        try c.encodeIfPresent(kind?.rawValue, forKey: .kind)
    }
}

extension ImageInfo {
    enum CodingKeys: String, CodingKey {
        case path, buildId, base, size
    }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            path: try c.decode(String.self, forKey: .path),
            buildId: try c.decodeIfPresent(String.self, forKey: .buildId),
            base: try c.decodeHexAddress(forKey: .base), size: try c.decodeIfPresent(UInt64.self, forKey: .size))
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(path, forKey: .path)
        try c.encodeIfPresent(buildId, forKey: .buildId)
        try c.encodeHexAddress(base, forKey: .base)
        try c.encodeIfPresent(size, forKey: .size)
    }
}

extension StallReport.ThreadSnapshot {
    enum CodingKeys: String, CodingKey {
        case threadId, name, state, wchan, syscall, waitAddress, waitingForThreadId, frames, error
    }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            threadId: try c.decode(Int32.self, forKey: .threadId), name: try c.decode(String.self, forKey: .name),
            state: try c.decode(String.self, forKey: .state), wchan: try c.decodeIfPresent(String.self, forKey: .wchan),
            syscall: try c.decodeIfPresent(String.self, forKey: .syscall),
            waitAddress: try c.decodeHexAddressIfPresent(forKey: .waitAddress),
            waitingForThreadId: try c.decodeIfPresent(Int32.self, forKey: .waitingForThreadId),
            frames: try c.decode([StackFrame].self, forKey: .frames),
            error: try c.decodeIfPresent(String.self, forKey: .error))
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(threadId, forKey: .threadId)
        try c.encode(name, forKey: .name)
        try c.encode(state, forKey: .state)
        try c.encodeIfPresent(wchan, forKey: .wchan)
        try c.encodeIfPresent(syscall, forKey: .syscall)
        try c.encodeHexAddressIfPresent(waitAddress, forKey: .waitAddress)
        try c.encodeIfPresent(waitingForThreadId, forKey: .waitingForThreadId)
        try c.encode(frames, forKey: .frames)
        try c.encodeIfPresent(error, forKey: .error)
    }
}
