//! Side-by-side chart (placeholder until drawn).

use super::Paired;

pub fn render(p: &Paired) -> String {
    let _ = p;
    String::from("<svg xmlns=\"http://www.w3.org/2000/svg\"/>")
}
