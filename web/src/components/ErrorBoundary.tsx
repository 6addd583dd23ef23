// Catches a render error below it and shows it in place of the view, with a way back, instead of the
// blank page an uncaught error leaves. A change of route clears it (the next view gets a fresh try).
import { Component, type ComponentChildren } from 'preact';

interface Props {
  children: ComponentChildren;
  /** What failed, for the message: "this view". */
  what?: string;
}

export class ErrorBoundary extends Component<Props, { error: Error | null; hash: string }> {
  state = { error: null as Error | null, hash: location.hash };

  static getDerivedStateFromError(error: unknown) {
    return { error: error instanceof Error ? error : new Error(String(error)), hash: location.hash };
  }

  private onHash = () => {
    if (this.state.error && location.hash !== this.state.hash) this.setState({ error: null });
  };

  componentDidMount() {
    window.addEventListener('hashchange', this.onHash);
  }

  componentWillUnmount() {
    window.removeEventListener('hashchange', this.onHash);
  }

  render() {
    const { error } = this.state;
    if (!error) return this.props.children;
    return (
      <div class="banner error render-error" role="alert">
        <p>
          {this.props.what ?? 'This view'} failed to draw: <code>{error.message}</code>
        </p>
        <p>
          <button type="button" onClick={() => this.setState({ error: null })}>
            try again
          </button>{' '}
          <a href="#/">back to the node</a>
        </p>
      </div>
    );
  }
}
