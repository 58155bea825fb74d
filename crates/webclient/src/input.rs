//! Input as the web component hands it over: device events grouped in
//! transactions, turned into RDP fast-path input by `ironrdp-input`.

use ironrdp_input::{MousePosition, Operation, Scancode, WheelRotations};
use wasm_bindgen::prelude::*;

/// One key, button, move or wheel turn.
#[wasm_bindgen]
pub struct DeviceEvent(pub(crate) Option<Operation>);

#[wasm_bindgen]
impl DeviceEvent {
    #[wasm_bindgen(js_name = mouseButtonPressed)]
    pub fn mouse_button_pressed(button: u8) -> DeviceEvent {
        DeviceEvent(
            ironrdp_input::MouseButton::from_web_button(button).map(Operation::MouseButtonPressed),
        )
    }

    #[wasm_bindgen(js_name = mouseButtonReleased)]
    pub fn mouse_button_released(button: u8) -> DeviceEvent {
        DeviceEvent(
            ironrdp_input::MouseButton::from_web_button(button).map(Operation::MouseButtonReleased),
        )
    }

    #[wasm_bindgen(js_name = mouseMove)]
    pub fn mouse_move(x: u16, y: u16) -> DeviceEvent {
        DeviceEvent(Some(Operation::MouseMove(MousePosition { x, y })))
    }

    /// A wheel turn. The browser counts in pixels, lines or pages
    /// (`unit` 0, 1, 2); RDP in 1/120ths of a notch.
    #[wasm_bindgen(js_name = wheelRotations)]
    pub fn wheel_rotations(vertical: bool, amount: f64, unit: u8) -> DeviceEvent {
        let per_unit = match unit {
            1 => 40.0,
            2 => 120.0,
            _ => 1.0,
        };
        let units = (amount * per_unit).clamp(f64::from(i16::MIN), f64::from(i16::MAX)) as i16;
        DeviceEvent(Some(Operation::WheelRotations(WheelRotations {
            is_vertical: vertical,
            rotation_units: units,
        })))
    }

    #[wasm_bindgen(js_name = keyPressed)]
    pub fn key_pressed(scancode: u16) -> DeviceEvent {
        DeviceEvent(Some(Operation::KeyPressed(Scancode::from(scancode))))
    }

    #[wasm_bindgen(js_name = keyReleased)]
    pub fn key_released(scancode: u16) -> DeviceEvent {
        DeviceEvent(Some(Operation::KeyReleased(Scancode::from(scancode))))
    }

    #[wasm_bindgen(js_name = unicodePressed)]
    pub fn unicode_pressed(character: char) -> DeviceEvent {
        DeviceEvent(Some(Operation::UnicodeKeyPressed(character)))
    }

    #[wasm_bindgen(js_name = unicodeReleased)]
    pub fn unicode_released(character: char) -> DeviceEvent {
        DeviceEvent(Some(Operation::UnicodeKeyReleased(character)))
    }
}

/// Events applied together.
#[wasm_bindgen]
#[derive(Default)]
pub struct InputTransaction(pub(crate) Vec<Operation>);

/// More events than one transaction ever needs (the component sends a few).
const MAX_EVENTS: usize = 256;

#[wasm_bindgen]
impl InputTransaction {
    #[wasm_bindgen(constructor)]
    pub fn new() -> InputTransaction {
        InputTransaction::default()
    }

    #[wasm_bindgen(js_name = addEvent)]
    pub fn add_event(&mut self, event: DeviceEvent) {
        if let Some(op) = event.0
            && self.0.len() < MAX_EVENTS
        {
            self.0.push(op);
        }
    }
}
