//! The graph's fingerprint: FNV-1a over a canonical description of its structure (its
//! operators, flows and topics). A plan records it, and a session refuses a graph whose
//! fingerprint differs from its plan's.

use std::fmt::Write as _;

use holo_params::__private::Fnv1a64;

use crate::graph::{EdgeNode, Graph, OperatorNode, PortFacts, TopicNode};

/// The fingerprint of `graph`.
pub(crate) fn fingerprint(graph: &Graph) -> String {
    let mut f = Fingerprint::new();
    for (o, op) in graph.operators.iter().enumerate() {
        f.operator(graph.names.get(o), op, graph.port_facts_of(o));
    }
    for e in &graph.edges {
        f.flow(e);
    }
    for t in &graph.topics {
        f.topic(t);
    }
    f.finish()
}

/// A fingerprint being computed: fed every operator, then every flow, in index order.
/// The compiler feeds it from the pass that reads the graph's records anyway, so that
/// at 10,000 operators it costs no second sweep over memory that no longer fits in cache.
pub(crate) struct Fingerprint(Fnv1a64);

impl Fingerprint {
    pub(crate) fn new() -> Self {
        Self(Fnv1a64::new())
    }

    /// Operator `op`, named `name`, with its ports' facts: its name and its ports' as the
    /// graph's dense tables hold them (`Graph::names`, `Graph::port_facts`), the same
    /// strings as its own, read without a cache miss per operator.
    pub(crate) fn operator(&mut self, name: &str, op: &OperatorNode, ports: &[PortFacts]) {
        self.eat(name);
        self.eat(op.rust_type);
        for p in ports {
            self.eat(p.name);
        }
        // Formatted straight into the hash, not built first.
        let _ = write!(self, "{}", op.params_json);
        self.end();
    }

    /// Flow `e`, as "{operator}.{port}>{operator}.{port}".
    pub(crate) fn flow(&mut self, e: &EdgeNode) {
        self.number(e.from.0.0);
        self.write(b".");
        self.number(e.from.1);
        self.write(b">");
        self.number(e.to.0.0);
        self.write(b".");
        self.number(e.to.1);
        self.end();
    }

    /// Topic `t`, as "{direction}:{name}@{operator}.{port}". Fed after every flow.
    pub(crate) fn topic(&mut self, t: &TopicNode) {
        self.write(t.direction.name().as_bytes());
        self.write(b":");
        self.eat(&t.name);
        self.number(t.port.0.0);
        self.write(b".");
        self.number(t.port.1);
        self.end();
    }

    pub(crate) fn finish(self) -> String {
        format!("{:016x}", self.0.finish())
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0 = self.0.write(bytes);
    }

    // Each string ends in 0xff, a byte UTF-8 never holds: the byte sequence hashed tells
    // the strings apart ("ab", "c" is not "a", "bc").
    fn eat(&mut self, s: &str) {
        self.write(s.as_bytes());
        self.end();
    }

    fn end(&mut self) {
        self.write(&[0xff]);
    }

    /// `n` in decimal, as `Display` writes it.
    fn number(&mut self, mut n: u32) {
        let mut digits = [0u8; 10];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b"0123456789"[(n % 10) as usize];
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.write(&digits[at..]);
    }
}

impl std::fmt::Write for Fingerprint {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.write(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Fingerprint;

    #[test]
    fn numbers_hash_as_their_decimal_text() {
        for n in [0, 7, 10, 4_294_967_295] {
            let mut by_digits = Fingerprint::new();
            by_digits.number(n);
            let mut by_text = Fingerprint::new();
            by_text.write(n.to_string().as_bytes());
            assert_eq!(by_digits.finish(), by_text.finish(), "{n}");
        }
    }
}
