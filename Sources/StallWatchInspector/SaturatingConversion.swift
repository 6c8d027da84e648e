// SaturatingConversion: Double → integer conversions that clamp instead of trapping on untrusted values.

extension Int {
    /// `value` rounded toward zero, clamped to `Int`'s range; 0 for NaN. Report values are validated on decode,
    /// but views and exporters also format reports built in memory, so no conversion may trap.
    init(saturating value: Double) {
        if value.isNaN {
            self = 0
        } else if value >= 9.223_372_036_854_775e18 {
            self = .max
        } else if value <= -9.223_372_036_854_775e18 {
            self = .min
        } else {
            self = Int(value)
        }
    }
}

extension Int64 {
    /// `value` rounded toward zero, clamped to `Int64`'s range; 0 for NaN.
    init(saturating value: Double) {
        self = Int64(Int(saturating: value))
    }
}
