//! Distribution chart (placeholder until drawn).

use super::Distribution;

pub fn render(d: &Distribution) -> String {
    let _ = d;
    String::from("<svg xmlns=\"http://www.w3.org/2000/svg\"/>")
}
