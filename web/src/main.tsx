import { render } from 'preact';
import { App } from './App';
import { ErrorBoundary } from './components/ErrorBoundary';
import './styles.css';

render(
  <ErrorBoundary what="The dashboard">
    <App />
  </ErrorBoundary>,
  document.getElementById('app')!,
);
