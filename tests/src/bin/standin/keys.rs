//! What a byte sequence read from the terminal is: a bracketed paste's start or end, or
//! another escape.

pub(super) enum Escape {
    Incomplete,
    PasteStart,
    PasteEnd,
    Other,
}

pub(super) fn classify_escape(seq: &[u8]) -> Escape {
    match seq {
        [0x1b] => Escape::Incomplete,
        [0x1b, b'['] => Escape::Incomplete,
        [0x1b, b'[', rest @ ..] => match rest.last() {
            Some(&c) if (0x40..=0x7e).contains(&c) => match rest {
                b"200~" => Escape::PasteStart,
                b"201~" => Escape::PasteEnd,
                _ => Escape::Other,
            },
            _ if rest.len() > 16 => Escape::Other,
            _ => Escape::Incomplete,
        },
        _ => Escape::Other,
    }
}
