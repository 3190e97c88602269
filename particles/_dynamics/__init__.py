"""Dynamics: the field protocol, steppers, step-size controllers, saving, the one solve loop
(:func:`~particles.simulate`) and stacks of layers."""
