//! An error said with the causes under it, for messages a person reads.

/// An error with the causes under it (`error sending request … : connection refused`): an
/// HTTP client's own message names the request, and the cause that says why is underneath
/// (issue 35.9: an unreachable relay showed only "error sending request").
pub fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut said = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !said.contains(&text) {
            said.push_str(": ");
            said.push_str(&text);
        }
        cause = c.source();
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that says only what it was doing, with the reason underneath, as an HTTP
    /// client's "error sending request for url (…)" over "connection refused".
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn an_error_says_the_causes_under_it_once_each() {
        let e = Layer(
            "error sending request for url (http://127.0.0.1:9/v1/token)",
            Some(Box::new(Layer(
                "client error (Connect)",
                Some(Box::new(Layer("Connection refused (os error 111)", None))),
            ))),
        );
        assert_eq!(
            with_causes(&e),
            "error sending request for url (http://127.0.0.1:9/v1/token): client error (Connect): Connection refused (os error 111)"
        );
        // A cause its parent already says is not said twice.
        let repeated = Layer("connect: refused", Some(Box::new(Layer("refused", None))));
        assert_eq!(with_causes(&repeated), "connect: refused");
    }
}
