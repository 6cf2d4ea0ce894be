/// A value shared by the closures of one bulk change as it goes a slice at a time (confined to the loop thread).
final class Box<Value> {
    var value: Value
    init(_ value: Value) { self.value = value }
}
