//! The run's timeline as SVG (placeholder until drawn).

use crate::report::lanes::Lanes;

pub fn render(lanes: &Lanes) -> String {
    let _ = lanes;
    String::from("<svg xmlns=\"http://www.w3.org/2000/svg\"/>")
}
