"""memoryd as a background service: the LaunchAgent (macOS) and the systemd user units (Linux).

Modules, one concern each:

* :mod:`~memoryd.cli.service.common`: running ``launchctl``/``systemctl``, atomic writes, the marker.
* :mod:`~memoryd.cli.service.templates`: find the templates (``launchd/`` in the checkout, shipped in the
  wheel as ``memoryd/_service_templates``), fill and validate them.
* :mod:`~memoryd.cli.service.launchd`, :mod:`~memoryd.cli.service.systemd`: the two managers.
* :mod:`~memoryd.cli.service.state`: what a manager reports; taking over from a daemon a shim started.
* :mod:`~memoryd.cli.service.manager`: which manager runs here; ``service_state()`` for ``memoryd doctor``.
* :mod:`~memoryd.cli.service.command`: ``memoryd service install|uninstall|start|stop|restart|status|logs``.
"""
