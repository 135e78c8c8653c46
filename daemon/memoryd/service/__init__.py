"""memoryd as a background service: the LaunchAgent (macOS) and the systemd user units (Linux).

Modules, one concern each:

* :mod:`~memoryd.service.common`: running ``launchctl``/``systemctl``, atomic writes, the marker.
* :mod:`~memoryd.service.templates`: find the templates (``launchd/`` in the checkout, shipped in the
  wheel as ``memoryd/_service_templates``), fill and validate them.
* :mod:`~memoryd.service.launchd`, :mod:`~memoryd.service.systemd`: the two managers.
* :mod:`~memoryd.service.state`: what a manager reports; taking over from a daemon a shim started.
* :mod:`~memoryd.service.manager`: which manager runs here; ``service_state()`` for ``memoryd doctor``.
* :mod:`~memoryd.service.cli`: ``memoryd service install|uninstall|start|stop|restart|status|logs``.
"""
